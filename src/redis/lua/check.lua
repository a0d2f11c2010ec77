-- One check with the one algorithm this script was built with.
-- KEYS: the limiter key's state [, sliding_log's auxiliary key].
-- ARGV: now in µs ('' for Redis TIME), expiry margin in ms, cost, then the algorithm's two
--   parameters (count and period, or capacity and emission interval), then max_delay in µs (how
--   far ahead a meter may book a slot; 0 for none).
-- Returns {allowed (1/0), remaining, retry_after µs, reset_after µs, delay µs,
--   replenish_after µs}.
local key, aux = KEYS[1], KEYS[2]
--@insert clock
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local a, b, max_delay = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
--@insert load
--@insert decide
--@insert decision
--@insert commit
return { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
