-- leaky_bucket: level and the time it was drained to, packed with tag 'l'.
local LEAKY_BUCKET = '<I4I7'

algorithms.leaky_bucket = {
  load = function(keys, now)
    local f, present = load_packed(keys.main, 'l', LEAKY_BUCKET)
    if f then
      return { level = f[1], drained_at = f[2] }, present
    end
    return { level = 0, drained_at = now }, present
  end,

  decide = function(s, _, now, cost, capacity, interval, max_delay)
    local level, drained_at = s.level, s.drained_at
    if level > 0 and now > drained_at then
      local leaked = div(now - drained_at, interval)
      level = math.max(0, level - leaked)
      drained_at = level == 0 and now or drained_at + leaked * interval
    elseif level == 0 then
      drained_at = now
    end
    local into_next_drop = now - drained_at
    local function wait_for(units)
      return (level + units - capacity) * interval - into_next_drop
    end
    local units = units_judged(cost)
    local allowed, delay, retry_after = meter(level + units <= capacity, wait_for(units), cost,
      max_delay)
    if allowed then
      level = level + cost
    end
    local remaining = math.max(capacity - level, 0)
    return allowed, remaining, retry_after, wait_for(capacity),
      remaining < capacity and wait_for(remaining + 1) or 0,
      { level = level, drained_at = drained_at }, delay
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 'l', LEAKY_BUCKET, next.level, next.drained_at)
  end,
}
