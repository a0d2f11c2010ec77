-- One check with the one algorithm this script was built with.
-- KEYS: the limiter key's state [, sliding_log's auxiliary key].
-- ARGV: now in µs ('' for Redis TIME), expiry margin in ms, cost, then the algorithm's two
--   parameters (count and period, or capacity and emission interval).
-- Returns {allowed (1/0), remaining, retry_after µs, reset_after µs}.
local _, algorithm = next(algorithms)
local keys = { main = KEYS[1], aux = KEYS[2] }
local now = clock(ARGV[1])
local margin = tonumber(ARGV[2])
local cost, a, b = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local state, present = algorithm.load(keys, now, a, b)
local d = decide(algorithm, keys, state, present, now, cost, a, b)
commit(algorithm, keys, d, now, cost, margin)
return reply(d)
