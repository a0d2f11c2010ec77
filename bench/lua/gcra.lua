-- The reference for scripts/bench-scripts.sh: gcra written the shortest way for sluice's check
-- script's keys, arguments, reply and stored state (the theoretical arrival time as a decimal
-- integer), with every behaviour of Decide(GcraState) in src/core/algorithms.cc.
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local capacity, interval, max_delay = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

-- Absent (false), another algorithm's state (a packed string, or an error reply: a sorted set).
local stored = redis.pcall('GET', key)
-- A TAT as sluice writes it, at most 3 x 366 days ahead; anything else is a foreign state.
local tat = type(stored) == 'string' and tonumber(stored)
if not (tat and tat >= 0 and tat <= now + 94867200000000 and string.format('%d', tat) == stored) then
  tat = now
end
tat = math.max(tat, now)
local tolerance = capacity * interval
local wait = tat + math.max(cost, 1) * interval - tolerance - now
local allowed, delay, retry_after = true, 0, 0
if wait > 0 then
  if cost > 0 and wait <= max_delay then
    delay = wait
  else
    allowed = false
    retry_after = cost > 0 and wait - max_delay or wait
  end
end
if allowed then
  tat = tat + cost * interval
end
local remaining = math.max(math.floor((now + tolerance - tat) / interval), 0)
local replenish_after = 0
if remaining < capacity then
  replenish_after = tat + (remaining + 1) * interval - tolerance - now
end
local reset_after = tat - now
if allowed and cost > 0 then
  redis.call('SET', key, string.format('%d', tat), 'PX',
    string.format('%d', math.floor((reset_after + 999) / 1000) + margin))
elseif reset_after == 0 and stored then
  redis.call('DEL', key)
end
return { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
