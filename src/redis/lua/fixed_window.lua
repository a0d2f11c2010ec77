-- fixed_window: the time of the latest admission and the count of its window, packed with tag
-- 'f'. (An earlier version kept the window's start in the first field: a time of the same
-- window, which decides the same while the period is unchanged.)
local FIXED_WINDOW = '<I7I4'

algorithms.fixed_window = {
  load = function(keys)
    local f, present = load_packed(keys.main, 'f', FIXED_WINDOW)
    if f then
      return { latest = f[1], count = f[2] }, present
    end
    return { latest = 0, count = 0 }, present
  end,

  decide = function(s, _, now, cost, count, period)
    local start = window_start(math.max(now, s.latest), period)
    local n = s.latest >= start and s.count or 0
    local allowed = n + units_judged(cost) <= count
    if allowed then
      n = n + cost
    end
    local until_next_window = start + period - now
    local wait = n > 0 and until_next_window or 0
    return allowed, math.max(count - n, 0), until_next_window, wait, wait,
      { latest = math.max(now, s.latest), count = n }
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 'f', FIXED_WINDOW, next.latest, next.count)
  end,
}
