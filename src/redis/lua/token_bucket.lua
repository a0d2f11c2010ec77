-- token_bucket: tokens and the time they were refilled to, packed with tag 't'. Tokens are
-- signed: a booked slot takes them below zero.

--@section load
local capacity, interval = a, b
--@insert read
--@insert bounds
local held = type(stored) == 'string' and #stored == 12 and string.byte(stored) == 116 -- 't'
local stored_tokens, stored_refilled_at = capacity, now
if held then
  local tokens, refilled_at = struct.unpack('<i4I7', stored, 2)
  held = tokens >= -math.floor(longest / interval) and tokens <= max_count
    and refilled_at <= latest_time
  if held then
    stored_tokens, stored_refilled_at = tokens, refilled_at
  end
end

--@section refill
-- The state refilled to now, as a check sees it: tokens, refilled_at.
local tokens, refilled_at = stored_tokens, stored_refilled_at
if tokens >= capacity then
  -- Full, or above a burst lowered since: the capacity, whose refill starts now.
  tokens, refilled_at = capacity, now
elseif now > refilled_at then
  local earned = math.floor((now - refilled_at) / interval)
  tokens = math.min(capacity, tokens + earned)
  refilled_at = tokens == capacity and now or refilled_at + earned * interval
end

--@section decide
--@insert refill
-- Negative when the clock is behind refilled_at: the next token is that much further. The wait
-- until `u` tokens are there is (u - tokens) * interval - into_next_token.
local into_next_token = now - refilled_at
local units = math.max(cost, 1)
local fits_now, wait = tokens >= units, (units - tokens) * interval - into_next_token
--@insert meter
if allowed then
  tokens = tokens - cost
end
local remaining = math.max(tokens, 0)
local reset_after = (capacity - tokens) * interval - into_next_token
local replenish_after = 0
if remaining < capacity then
  replenish_after = (remaining + 1 - tokens) * interval - into_next_token
end

--@section save
redis.call('SET', key, 't' .. struct.pack('<i4I7', tokens, refilled_at), 'PX', ttl)

--@section give_back
--@insert refill
tokens = math.min(capacity, tokens + units)
if tokens == capacity then
  refilled_at = now -- as a refill to full
end
local reset_after = (capacity - tokens) * interval - (now - refilled_at)
