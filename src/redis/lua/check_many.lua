-- Several checks of the one algorithm this script was built with, each decided on its own, in
-- order: the checks a connection coalesced into one call. KEYS and ARGV are those of each check's
-- own call (check.lua), one check after another; the reply is one check's reply per check.
-- Written in src/redis/script_call.h.
local checks = #ARGV / 6
local key_count = #KEYS / checks
local replies = {}
local redis_now
for i = 0, checks - 1 do
  local key, aux = KEYS[i * key_count + 1], nil
  if key_count == 2 then
    aux = KEYS[i * key_count + 2]
  end
  local at = i * 6
  -- The caller's time when it passed one, else Redis TIME, read once for the call.
  local now = tonumber(ARGV[at + 1])
  if not now then
    if not redis_now then
      redis.replicate_commands() -- see common.lua's clock section
      local t = redis.call('TIME')
      redis_now = t[1] * 1000000 + t[2]
    end
    now = redis_now
  end
  local margin, cost = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local a, b, max_delay = tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5]), tonumber(ARGV[at + 6])
  --@insert load
  --@insert decide
  --@insert decision
  --@insert commit
  replies[i + 1] = { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
end
return replies
