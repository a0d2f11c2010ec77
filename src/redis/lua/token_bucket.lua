-- token_bucket: tokens and the time they were refilled to, packed with tag 't'. Tokens are
-- signed: a booked slot takes them below zero.
local TOKEN_BUCKET = '<i4I7'

algorithms.token_bucket = {
  load = function(keys, now, capacity)
    local f, present = load_packed(keys.main, 't', TOKEN_BUCKET)
    if f then
      return { tokens = f[1], refilled_at = f[2] }, present
    end
    return { tokens = capacity, refilled_at = now }, present
  end,

  decide = function(s, _, now, cost, capacity, interval, max_delay)
    local tokens, refilled_at = s.tokens, s.refilled_at
    if tokens < capacity and now > refilled_at then
      local earned = div(now - refilled_at, interval)
      tokens = math.min(capacity, tokens + earned)
      refilled_at = tokens == capacity and now or refilled_at + earned * interval
    elseif tokens >= capacity then
      refilled_at = now
    end
    local units = units_judged(cost)
    local into_next_token = now - refilled_at
    local allowed, delay, retry_after = meter(tokens >= units,
      (units - tokens) * interval - into_next_token, cost, max_delay)
    if allowed then
      tokens = tokens - cost
    end
    return allowed, tokens, retry_after, (capacity - tokens) * interval - into_next_token,
      { tokens = tokens, refilled_at = refilled_at }, delay
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 't', TOKEN_BUCKET, next.tokens, next.refilled_at)
  end,
}
