-- fixed_window: window start and count, packed with tag 'f'.
local FIXED_WINDOW = '<I7I4'

algorithms.fixed_window = {
  load = function(keys)
    local f, present = load_packed(keys.main, 'f', FIXED_WINDOW)
    if f then
      return { start = f[1], count = f[2] }, present
    end
    return { start = 0, count = 0 }, present
  end,

  decide = function(s, _, now, cost, count, period)
    local start = now - math.fmod(now, period)
    local n = s.start == start and s.count or 0
    local allowed = n + units_judged(cost) <= count
    if allowed then
      n = n + cost
    end
    local until_next_window = start + period - now
    return allowed, count - n, until_next_window, n > 0 and until_next_window or 0,
      { start = start, count = n }
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 'f', FIXED_WINDOW, next.start, next.count)
  end,
}
