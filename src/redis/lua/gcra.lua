-- gcra: the theoretical arrival time as a decimal integer, which Redis stores as a bare
-- integer. The other string states start with a letter, which tonumber() does not read.

--@section load
local capacity, interval = a, b
--@insert read
local stored_tat = tonumber(stored)
local held = stored_tat ~= nil -- the key holds a TAT
stored_tat = stored_tat or now

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
