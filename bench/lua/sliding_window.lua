-- The reference for scripts/bench-scripts.sh: sliding_window written the shortest way for
-- sluice's check script's keys, arguments, reply and stored state ('w', then the window's start,
-- the previous and current counts and the latest admission packed '<I7I4I4I7'), with every
-- behaviour of Decide(SlidingWindowState) in src/core/algorithms.cc, its doubles computed in the
-- same order.
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local count, period = tonumber(ARGV[4]), tonumber(ARGV[5])

local stored = redis.pcall('GET', key)
local stored_start, stored_previous, stored_current, latest = 0, 0, 0, 0
if type(stored) == 'string' and #stored == 23 and string.byte(stored) == 119 then
  stored_start, stored_previous, stored_current, latest = struct.unpack('<I7I4I4I7', stored, 2)
  -- Within the bounds of a state sluice writes, else a foreign state.
  if stored_start > now + 94867200000000 or latest > now + 94867200000000
    or stored_previous > 1000000000 or stored_current > 1000000000 then
    stored_start, stored_previous, stored_current, latest = 0, 0, 0, 0
  end
end
-- A state stamped in a window later than now's is decided at that window's start.
local at = math.max(now, latest - latest % period)
local lag = at - now
local start = at - at % period
-- Each count goes to the window of the latest time its units may have come.
local previous, current = 0, 0
local window = latest - latest % period
if window == start then
  current = stored_current
elseif window == start - period then
  previous = stored_current
end
window = stored_start - 1 - (stored_start - 1) % period
if window == start then
  current = current + stored_previous
elseif window == start - period then
  previous = previous + stored_previous
end
local elapsed = at - start

local function admits(p, c, e, units)
  return p * ((period - e) / period) + c + units <= count
end
-- The smallest elapsed in [lo, hi] at which `units` fit, or -1.
local function first_admitting(p, c, lo, hi, units)
  if lo > hi or not admits(p, c, hi, units) then
    return -1
  end
  while lo < hi do
    local mid = lo + math.floor((hi - lo) / 2)
    if admits(p, c, mid, units) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end
local function wait_for(units)
  local e = first_admitting(previous, current, elapsed + 1, period - 1, units)
  if e >= 0 then
    return e - elapsed + lag
  end
  e = first_admitting(current, 0, 0, period - 1, units)
  if e >= 0 then
    return period + e - elapsed + lag
  end
  return 2 * period - elapsed + lag
end

local units = math.max(cost, 1)
local allowed = admits(previous, current, elapsed, units)
local retry_after = 0
if allowed then
  current = current + cost
else
  retry_after = wait_for(units)
end
local remaining = math.max(math.floor(count - (previous * ((period - elapsed) / period) + current)),
  0)
local reset_after = 0
if current > 0 then
  reset_after = 2 * period - elapsed + lag
elseif previous > 0 then
  reset_after = period - elapsed + lag
end
local replenish_after = remaining < count and wait_for(remaining + 1) or 0
if allowed and cost > 0 then
  redis.call('SET', key, 'w' .. struct.pack('<I7I4I4I7', start, previous, current,
    math.max(now, latest)), 'PX',
    string.format('%d', math.floor((reset_after + 999) / 1000) + margin))
elseif reset_after == 0 and stored then
  redis.call('DEL', key)
end
return { allowed and 1 or 0, remaining, retry_after, reset_after, 0, replenish_after }
