-- token_bucket: tokens and the time they were refilled to, packed with tag 't'. Tokens are
-- signed: a booked slot takes them below zero.

--@section load
local capacity, interval = a, b
--@insert read
--@insert bounds
local held = type(stored) == 'string' and #stored == 12 and string.byte(stored) == 116 -- 't'
local stored_free, stored_at = capacity, now
if held then
  local tokens, refilled_at = struct.unpack('<i4I7', stored, 2)
  held = tokens >= -math.floor(longest / interval) and tokens <= max_count
    and refilled_at <= latest_time
  if held then
    stored_free, stored_at = tokens, refilled_at
  end
end

--@section decide
--@insert bucket_decide

--@section save
redis.call('SET', key, 't' .. struct.pack('<i4I7', free, at), 'PX', ttl)

--@section give_back
--@insert bucket_give_back
