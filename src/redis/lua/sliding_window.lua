-- sliding_window: window start, previous and current counts and the latest admission counted in
-- current, packed with tag 'w'.
local SLIDING_WINDOW = '<I7I4I4I7'
-- An earlier version kept no latest admission: its window's start stands for it, a time of the
-- same window, which decides the same while the period is unchanged.
local SLIDING_WINDOW_WITHOUT_LATEST = '<I7I4I4'

-- The same IEEE operations in the same order as SlidingEstimate in algorithms.cc.
local function sliding_estimate(previous, current, elapsed, period)
  return previous * ((period - elapsed) / period) + current
end

local function sliding_admits(previous, current, elapsed, period, units, count)
  return sliding_estimate(previous, current, elapsed, period) + units <= count
end

-- The smallest elapsed in [lo, hi] at which the window admits `units`, or -1 (bisection: the
-- estimate only falls as elapsed grows).
local function first_admitting_elapsed(previous, current, lo, hi, period, units, count)
  if lo > hi or not sliding_admits(previous, current, hi, period, units, count) then
    return -1
  end
  while lo < hi do
    local mid = lo + div(hi - lo, 2)
    if sliding_admits(previous, current, mid, period, units, count) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- The wait after `elapsed` until the window admits `units` (<= count): later in this window,
-- else in the next one (where `current` becomes `previous`), else two windows on, when nothing
-- weighs any more.
local function sliding_wait(previous, current, elapsed, period, units, count)
  local at = first_admitting_elapsed(previous, current, elapsed + 1, period - 1, period, units,
    count)
  if at >= 0 then
    return at - elapsed
  end
  at = first_admitting_elapsed(current, 0, 0, period - 1, period, units, count)
  if at >= 0 then
    return period + at - elapsed
  end
  return 2 * period - elapsed
end

algorithms.sliding_window = {
  load = function(keys)
    local f, present, without_latest =
      load_packed(keys.main, 'w', SLIDING_WINDOW, SLIDING_WINDOW_WITHOUT_LATEST)
    if f then
      return { start = f[1], previous = f[2], current = f[3],
        latest = without_latest and f[1] or f[4] }, present
    end
    return { start = 0, previous = 0, current = 0, latest = 0 }, present
  end,

  decide = function(s, _, now, cost, count, period)
    -- As SlidingWindowState's Decide: a state stamped in a window later than now's is decided as
    -- at that window's start; each count goes to the window of the latest time its units may
    -- have come.
    local at = math.max(now, window_start(s.latest, period))
    local lag = at - now
    local start = window_start(at, period)
    local previous, current = 0, 0
    local function place(latest_possible, units)
      if units == 0 then
        return
      end
      local window = window_start(latest_possible, period)
      if window == start then
        current = current + units
      elseif window == start - period then
        previous = previous + units
      end
    end
    place(s.latest, s.current)
    place(s.start - 1, s.previous)

    local elapsed = at - start
    local units = units_judged(cost)
    local allowed = sliding_admits(previous, current, elapsed, period, units, count)
    local retry_after = 0
    if allowed then
      current = current + cost
    else
      retry_after = sliding_wait(previous, current, elapsed, period, units, count) + lag
    end
    local left = count - sliding_estimate(previous, current, elapsed, period)
    local remaining = math.max(math.floor(left), 0)
    local reset_after = 0
    if current > 0 then
      reset_after = 2 * period - elapsed + lag
    elseif previous > 0 then
      reset_after = period - elapsed + lag
    end
    local replenish_after = 0
    if remaining < count then
      replenish_after = sliding_wait(previous, current, elapsed, period, remaining + 1, count) + lag
    end
    return allowed, remaining, retry_after, reset_after, replenish_after,
      { start = start, previous = previous, current = current, latest = math.max(now, s.latest) }
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 'w', SLIDING_WINDOW, next.start, next.previous, next.current,
      next.latest)
  end,
}
