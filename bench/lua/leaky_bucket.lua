-- The reference for scripts/bench-scripts.sh: leaky_bucket written the shortest way for sluice's
-- check script's keys, arguments, reply and stored state ('l', then the level and the time it
-- was drained to packed '<I4I7'), with every behaviour of Decide(LeakyBucketState) in
-- src/core/algorithms.cc.
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

local stored = redis.pcall('GET', key)
local level, drained_at = 0, now
if type(stored) == 'string' and #stored == 12 and string.byte(stored) == 108 then
  local l, at = struct.unpack('<I4I7', stored, 2)
  -- Within the bounds of a state sluice writes, else a foreign state.
  if l - capacity <= math.floor(94867200000000 / interval) and at <= now + 94867200000000 then
    level, drained_at = l, at
  end
end
if level > 0 and now > drained_at then
  local leaked = math.floor((now - drained_at) / interval)
  level = math.max(0, level - leaked)
  drained_at = level == 0 and now or drained_at + leaked * interval
elseif level == 0 then
  drained_at = now
end
local into_next_drop = now - drained_at
local units = math.max(cost, 1)
local allowed, delay, retry_after = true, 0, 0
if level + units > capacity then
  local wait = (level + units - capacity) * interval - into_next_drop
  if cost > 0 and wait <= max_delay then
    delay = wait
  else
    allowed = false
    retry_after = cost > 0 and wait - max_delay or wait
  end
end
if allowed then
  level = level + cost
end
local remaining = math.max(capacity - level, 0)
local replenish_after = 0
if remaining < capacity then
  replenish_after = (level + remaining + 1 - capacity) * interval - into_next_drop
end
local reset_after = math.max(level * interval - into_next_drop, 0)
if allowed and cost > 0 then
  redis.call('SET', key, 'l' .. struct.pack('<I4I7', level, drained_at), 'PX',
    string.format('%d', math.floor((reset_after + 999) / 1000) + margin))
elseif reset_after == 0 and stored then
  redis.call('DEL', key)
end
return { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
