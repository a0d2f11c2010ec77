-- Several checks of the one algorithm this script was built with, each decided on its own, in
-- order: the checks a connection coalesced into one call. KEYS are each check's keys, ARGV its
-- runs of checks with the same parameters, then each check's cost; the reply is one check's
-- packed reply after another, in one flat array. Written in src/redis/script_call.h.
local runs = tonumber(ARGV[1])
local costs = 2 + runs * 6 -- the index before the first check's cost
local checks = #ARGV - costs
local key_count = #KEYS / checks
local replies = {}
local redis_now
-- The states of the one-key algorithms, all read by one command when there are several checks
-- (see the read section below).
local states = key_count == 1 and checks > 1 and redis.call('MGET', unpack(KEYS))
-- The keys of the checks so far, when the caller found that a key may repeat (read section).
local seen = ARGV[2] == '1' and {}
local run, next_run = 0, 0 -- the run of the check before, the first check of the next run
local now, margin, a, b, max_delay
for i = 0, checks - 1 do
  local key, aux = KEYS[i * key_count + 1], nil
  if key_count == 2 then
    aux = KEYS[i * key_count + 2]
  end
  if i == next_run then
    local at = 3 + run * 6
    -- The caller's time when it passed one, else Redis TIME, read once for the call.
    now = tonumber(ARGV[at + 1])
    if not now then
      if not redis_now then
        redis.replicate_commands() -- see common.lua's clock section
        local t = redis.call('TIME')
        redis_now = t[1] * 1000000 + t[2]
      end
      now = redis_now
    end
    margin, a, b = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
    max_delay = tonumber(ARGV[at + 5])
    run = run + 1
    next_run = run < runs and tonumber(ARGV[3 + run * 6]) or checks
  end
  local cost = tonumber(ARGV[costs + i + 1])
  --@insert load
  --@insert decide
  --@insert decision
  --@insert commit
  local r = i * 4
  if allowed then
    replies[r + 1], replies[r + 2] = remaining, delay
  else
    replies[r + 1], replies[r + 2] = -1 - remaining, retry_after
  end
  replies[r + 3], replies[r + 4] = reset_after, replenish_after
end
return replies

--@section read
-- The key's state as MGET read it, unless none did (a check alone) or a check before this one had
-- the key and may have changed it. MGET reads a key holding no string as false, absent or not:
-- present is then true, so that the commit deletes what check.lua would (the DEL of an absent key
-- changes nothing).
local stored, present
if not states or seen and seen[key] then
  stored = redis.pcall('GET', key) -- an error reply: the key holds sliding_log's sorted set
  present = stored ~= false
else
  if seen then
    seen[key] = true
  end
  stored, present = states[i + 1], true
end
