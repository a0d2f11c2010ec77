-- leaky_bucket: level and the time it was drained to, packed with tag 'l'.

--@section load
local capacity, interval = a, b
--@insert read
--@insert bounds
local held = type(stored) == 'string' and #stored == 12 and string.byte(stored) == 108 -- 'l'
local stored_level, stored_drained_at = 0, now
if held then
  local level, drained_at = struct.unpack('<I4I7', stored, 2)
  held = level - capacity <= math.floor(longest / interval) and drained_at <= latest_time
  if held then
    stored_level, stored_drained_at = level, drained_at
  end
end

--@section drain
-- The state drained to now, as a check sees it: level, drained_at.
local level, drained_at = stored_level, stored_drained_at
if level > 0 and now > drained_at then
  local leaked = math.floor((now - drained_at) / interval)
  level = math.max(0, level - leaked)
  drained_at = level == 0 and now or drained_at + leaked * interval
elseif level == 0 then
  drained_at = now
end

--@section decide
--@insert drain
-- Negative when the clock is behind drained_at: the next drop is that much further. A level
-- above the capacity (a burst lowered since) drains before anything fits. The wait until `u`
-- units fit is (level + u - capacity) * interval - into_next_drop.
local into_next_drop = now - drained_at
local units = math.max(cost, 1)
local fits_now = level + units <= capacity
local wait = (level + units - capacity) * interval - into_next_drop
--@insert meter
if allowed then
  level = level + cost
end
local remaining = math.max(capacity - level, 0)
local reset_after = level * interval - into_next_drop
local replenish_after = 0
if remaining < capacity then
  replenish_after = (level + remaining + 1 - capacity) * interval - into_next_drop
end

--@section save
redis.call('SET', key, 'l' .. struct.pack('<I4I7', level, drained_at), 'PX', ttl)

--@section give_back
--@insert drain
level = math.max(0, level - units)
if level == 0 then
  drained_at = now
end
local reset_after = level * interval - (now - drained_at)
