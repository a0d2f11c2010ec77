-- sliding_window: window start, previous and current counts and the latest admission counted in
-- current, packed with tag 'w'. An earlier version kept no latest admission ('<I7I4I4'): its
-- window's start stands for it, a time of the same window, which decides the same while the
-- period is unchanged.

--@section load
local count, period = a, b
--@insert read
--@insert bounds
local stored_start, stored_previous, stored_current, latest = 0, 0, 0, 0
if type(stored) == 'string' and string.byte(stored) == 119 then -- 'w'
  if #stored == 16 then
    stored_start, stored_previous, stored_current = struct.unpack('<I7I4I4', stored, 2)
    latest = stored_start
  elseif #stored == 23 then
    stored_start, stored_previous, stored_current, latest = struct.unpack('<I7I4I4I7', stored, 2)
  end
  if stored_start > latest_time or latest > latest_time or stored_previous > max_count
    or stored_current > max_count then
    stored_start, stored_previous, stored_current, latest = 0, 0, 0, 0
  end
end

--@section decide
-- As SlidingWindowState's Decide: a state stamped in a window later than now's is decided as at
-- that window's start; each count goes to the window of the latest time its units may have come.
local at = math.max(now, latest - latest % period)
local lag = at - now
local start = at - at % period
local previous, current = 0, 0
local function place(latest_possible, units)
  local window = latest_possible - latest_possible % period
  if window == start then
    current = current + units
  elseif window == start - period then
    previous = previous + units
  end
end
place(latest, stored_current)
place(stored_start - 1, stored_previous)
local elapsed = at - start

-- SlidingEstimate and SlidingAdmits: the same IEEE operations in the same order.
local function admits(p, c, e, units)
  return p * ((period - e) / period) + c + units <= count
end
-- The smallest elapsed in [lo, hi] at which the window admits `units`, or -1 (bisection: the
-- estimate only falls as elapsed grows).
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
-- The wait until the window admits `units` (<= count): later in this window, else in the next
-- one (where `current` becomes `previous`), else two windows on, when nothing weighs any more.
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
local remaining =
  math.max(math.floor(count - (previous * ((period - elapsed) / period) + current)), 0)
local reset_after = 0
if current > 0 then
  reset_after = 2 * period - elapsed + lag
elseif previous > 0 then
  reset_after = period - elapsed + lag
end
local replenish_after = remaining < count and wait_for(remaining + 1) or 0
local delay = 0

--@section save
redis.call('SET', key, 'w' .. struct.pack('<I7I4I4I7', start, previous, current,
  math.max(now, latest)), 'PX', ttl)
