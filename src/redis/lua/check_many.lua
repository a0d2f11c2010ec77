-- Several checks of the one algorithm this script was built with, each decided on its own, in
-- order: the checks a connection coalesced into one call. KEYS are each check's keys (across the
-- slots of a Redis Cluster node, only the first check's: the others' follow the costs), ARGV its
-- runs of checks with the same parameters, then each check's cost; the reply is one check's packed
-- reply after another, in one flat array. Written in src/redis/script_call.h.
local runs = tonumber(ARGV[1])
local costs = 3 + runs * 6 -- the index before the first check's cost
local across = ARGV[3] == '1'
local checks, key_count
if across then
  key_count = #KEYS
  checks = (#ARGV - costs + key_count) / (1 + key_count)
else
  checks = #ARGV - costs
  key_count = #KEYS / checks
end
-- The call's keys, one check's after another: key n is KEYS[n] or else ARGV[more_keys + n].
local more_keys = costs + checks - key_count
local replies = {}
local redis_now
-- The states of the one-key algorithms, read before the first decision when there are several
-- checks or the call is across slots (see the read section below).
local states
if across then
  -- Each key is read (sliding_log's two touched) before anything is written: a key of a slot the
  -- node does not serve (moved, or migrating and gone) fails the call here, having changed
  -- nothing, and the client then sends each check on its own. No command may read keys of two
  -- slots, so each is read alone.
  states = key_count == 1 and {} or nil
  for n = 1, checks * key_count, key_count do
    local key = KEYS[n] or ARGV[more_keys + n]
    if states then
      local stored = redis.pcall('GET', key)
      if type(stored) == 'table' then
        if not string.find(stored.err, 'WRONGTYPE', 1, true) then
          return stored
        end
        stored = false -- sliding_log's sorted set, read as MGET reads it
      end
      states[n] = stored
    else
      redis.call('EXISTS', key, KEYS[n + 1] or ARGV[more_keys + n + 1])
    end
  end
elseif key_count == 1 and checks > 1 then
  states = redis.call('MGET', unpack(KEYS))
end
-- The keys of the checks so far, when the caller found that a key may repeat (read section).
local seen = ARGV[2] == '1' and {}
local run, next_run = 0, 0 -- the run of the check before, the first check of the next run
local now, margin, a, b, max_delay
local i, key, aux, cost -- the check being decided
-- Decides check i and writes its reply, protected by the caller (pcall): a check whose key is at
-- fault gets the error as its reply, and the others are decided.
local function decide()
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
for check = 0, checks - 1 do
  i = check
  local n = i * key_count + 1
  key, aux = KEYS[n] or ARGV[more_keys + n], nil
  if key_count == 2 then
    aux = KEYS[n + 1] or ARGV[more_keys + n + 1]
  end
  if i == next_run then
    local at = 4 + run * 6
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
    next_run = run < runs and tonumber(ARGV[4 + run * 6]) or checks
  end
  cost = tonumber(ARGV[costs + i + 1])
  local decided, failure = pcall(decide)
  if not decided then
    -- An error reply's text (what Redis 7.0 gives pcall; a table holding it, as other versions
    -- may give), or the script's own failure on what a key holds ("user_script:<line>: ...").
    local message = type(failure) == 'table' and failure.err or tostring(failure)
    local own = string.find(message, '^user_script:')
    if not own and not string.find(message, '^WRONGTYPE') then
      return redis.error_reply(message) -- not this key's fault: OOM, a Cluster's refusal
    end
    local r = i * 4
    replies[r + 1] = { err = own and 'ERR ' .. message or message }
    replies[r + 2], replies[r + 3], replies[r + 4] = 0, 0, 0
  end
end
return replies

--@section read
-- The key's state as read before the first decision, unless it was not (a check alone) or a
-- check before this one had the key and may have changed it. That read gives false for a key
-- holding no string, absent or not: present is then true, so that the commit deletes what
-- check.lua would (the DEL of an absent key changes nothing).
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
