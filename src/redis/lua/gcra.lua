-- gcra: the theoretical arrival time as a decimal integer, which Redis stores as a bare
-- integer. The other string states start with a letter, which tonumber() does not read.

--@section load
local capacity, interval = a, b
--@insert read
--@insert bounds
local stored_tat = type(stored) == 'string' and tonumber(stored)
-- The key holds a TAT: a time written as string.format('%d') writes it (bounds).
local held = stored_tat and stored_tat >= 0 and stored_tat <= latest_time
  and string.format('%d', stored_tat) == stored
if not held then
  stored_tat = now
end

--@section decide
-- A TAT beyond now + tolerance (booked ahead, or a burst lowered since) admits nothing until the
-- clock reaches TAT - tolerance.
local tolerance = capacity * interval
local tat = math.max(stored_tat, now)
local wait = tat + math.max(cost, 1) * interval - tolerance - now
local fits_now = wait <= 0
--@insert meter
if allowed then
  tat = tat + cost * interval
end
-- Negative past a booking: floored or truncated, the maximum is 0.
local remaining = math.max(math.floor((now + tolerance - tat) / interval), 0)
local reset_after = tat - now
local replenish_after = 0
if remaining < capacity then
  replenish_after = tat + (remaining + 1) * interval - tolerance - now
end

--@section save
redis.call('SET', key, string.format('%d', tat), 'PX', ttl)

--@section give_back
local tat = math.max(math.max(stored_tat, now) - units * interval, now)
local reset_after = tat - now
