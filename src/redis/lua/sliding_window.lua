-- sliding_window: window start, previous and current counts, packed with tag 'w'.
local SLIDING_WINDOW = '<I7I4I4'

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

algorithms.sliding_window = {
  load = function(keys)
    local f, present = load_packed(keys.main, 'w', SLIDING_WINDOW)
    if f then
      return { start = f[1], previous = f[2], current = f[3] }, present
    end
    return { start = 0, previous = 0, current = 0 }, present
  end,

  decide = function(s, _, now, cost, count, period)
    local start = now - math.fmod(now, period)
    local previous, current = s.previous, s.current
    if s.start ~= start then
      previous = s.start == start - period and s.current or 0
      current = 0
    end
    local elapsed = now - start
    local units = units_judged(cost)
    local allowed = sliding_admits(previous, current, elapsed, period, units, count)
    local retry_after = 0
    if allowed then
      current = current + cost
    else
      -- Later in this window, else in the next one (where `current` becomes `previous`), else
      -- two windows on, when nothing weighs any more.
      local at = first_admitting_elapsed(previous, current, elapsed + 1, period - 1, period,
        units, count)
      if at >= 0 then
        retry_after = at - elapsed
      else
        at = first_admitting_elapsed(current, 0, 0, period - 1, period, units, count)
        if at >= 0 then
          retry_after = period + at - elapsed
        else
          retry_after = 2 * period - elapsed
        end
      end
    end
    local left = count - sliding_estimate(previous, current, elapsed, period)
    local reset_after = 0
    if current > 0 then
      reset_after = 2 * period - elapsed
    elseif previous > 0 then
      reset_after = period - elapsed
    end
    return allowed, math.floor(left), retry_after, reset_after,
      { start = start, previous = previous, current = current }
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 'w', SLIDING_WINDOW, next.start, next.previous, next.current)
  end,
}
