-- gcra: the theoretical arrival time as a decimal integer, which Redis stores as a bare
-- integer. The other string states start with a letter, so digits alone mean gcra.
algorithms.gcra = {
  load = function(keys, now)
    local v = redis.pcall('GET', keys.main) -- an error reply: sliding_log's sorted set
    if type(v) == 'string' and string.find(v, '^%d+$') then
      return { tat = tonumber(v) }, true
    end
    return { tat = now }, v ~= false
  end,

  decide = function(s, _, now, cost, capacity, interval, max_delay)
    local tolerance = capacity * interval
    local tat = math.max(s.tat, now)
    local function wait_for(units)
      return tat + units * interval - tolerance - now
    end
    local units = units_judged(cost)
    local allowed, delay, retry_after = meter(wait_for(units) <= 0, wait_for(units), cost,
      max_delay)
    if allowed then
      tat = tat + cost * interval
    end
    local remaining = math.max(div(now + tolerance - tat, interval), 0)
    return allowed, remaining, retry_after, tat - now,
      remaining < capacity and wait_for(remaining + 1) or 0, { tat = tat }, delay
  end,

  save = function(keys, _, next, _, _, ttl)
    redis.call('SET', keys.main, int(next.tat), 'PX', ttl)
  end,
}
