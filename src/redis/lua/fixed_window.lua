-- fixed_window: the time of the latest admission and the count of its window, packed with tag
-- 'f'. (An earlier version kept the window's start in the first field: a time of the same
-- window, which decides the same while the period is unchanged.)

--@section load
local count, period = a, b
--@insert read
--@insert bounds
local latest, latest_count = 0, 0
if type(stored) == 'string' and #stored == 12 and string.byte(stored) == 102 then -- 'f'
  latest, latest_count = struct.unpack('<I7I4', stored, 2)
  if latest > latest_time or latest_count > max_count then
    latest, latest_count = 0, 0
  end
end

--@section decide
local start = math.max(now, latest)
start = start - start % period
local n = latest >= start and latest_count or 0
local allowed = n + math.max(cost, 1) <= count
if allowed then
  n = n + cost
end
local retry_after = start + period - now
local reset_after = n > 0 and retry_after or 0
local remaining, replenish_after, delay = math.max(count - n, 0), reset_after, 0

--@section save
redis.call('SET', key, 'f' .. struct.pack('<I7I4', math.max(now, latest), n), 'PX', ttl)
