-- One check with the one algorithm this script was built with.
-- KEYS: the limiter key's state [, sliding_log's auxiliary key].
-- ARGV: now in µs ('' for Redis TIME), expiry margin in ms, cost, then the algorithm's two
--   parameters (count and period, or capacity and emission interval), then max_delay in µs (how
--   far ahead a meter may book a slot; 0 for none).
-- Returns {allowed (1/0), remaining, retry_after µs, reset_after µs, delay µs,
--   replenish_after µs}.
local _, algorithm = next(algorithms)
local keys = { main = KEYS[1], aux = KEYS[2] }
local now = clock(ARGV[1])
local margin = tonumber(ARGV[2])
local cost, a, b = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local max_delay = tonumber(ARGV[6])
local state, present = algorithm.load(keys, now, a, b)
local d = decide(algorithm, keys, state, present, now, cost, a, b, max_delay)
commit(algorithm, keys, d, now, cost, margin)
return reply(d)
