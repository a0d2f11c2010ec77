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
    local allow_at = tat + units_judged(cost) * interval - tolerance
    local allowed, delay, retry_after = meter(allow_at <= now, allow_at - now, cost, max_delay)
    local next_tat = allowed and tat + cost * interval or tat
    return allowed, div(now + tolerance - next_tat, interval), retry_after, next_tat - now,
      { tat = next_tat }, delay
  end,

  save = function(keys, _, next, _, _, ttl)
    redis.call('SET', keys.main, int(next.tat), 'PX', ttl)
  end,
}
