-- One check with the one algorithm this script was built with. Its KEYS, ARGV and reply are
-- written in src/redis/script_call.h.
local key, aux = KEYS[1], KEYS[2]
--@insert clock
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local a, b, max_delay = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
--@insert load
--@insert decide
--@insert decision
--@insert commit
return { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
