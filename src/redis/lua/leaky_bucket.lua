-- leaky_bucket: level and the time it was drained to, packed with tag 'l'.

--@section load
local capacity, interval = a, b
--@insert read
--@insert bounds
local held = type(stored) == 'string' and #stored == 12 and string.byte(stored) == 108 -- 'l'
local stored_free, stored_at = capacity, now
if held then
  local level, drained_at = struct.unpack('<I4I7', stored, 2)
  held = level - capacity <= math.floor(longest / interval) and drained_at <= latest_time
  if held then
    stored_free, stored_at = capacity - level, drained_at
  end
end

--@section decide
--@insert bucket_decide

--@section save
redis.call('SET', key, 'l' .. struct.pack('<I4I7', capacity - free, at), 'PX', ttl)

--@section give_back
--@insert bucket_give_back
