-- One check with the one algorithm this script was built with. Its KEYS, ARGV and reply are
-- written in src/redis/script_call.h.
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
