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
    if tokens >= capacity then
      -- Full, or above a burst lowered since: the capacity, whose refill starts now.
      tokens = capacity
      refilled_at = now
    elseif now > refilled_at then
      local earned = div(now - refilled_at, interval)
      tokens = math.min(capacity, tokens + earned)
      refilled_at = tokens == capacity and now or refilled_at + earned * interval
    end
    local into_next_token = now - refilled_at
    local function wait_for(units)
      return (units - tokens) * interval - into_next_token
    end
    local units = units_judged(cost)
    local allowed, delay, retry_after = meter(tokens >= units, wait_for(units), cost, max_delay)
    if allowed then
      tokens = tokens - cost
    end
    local remaining = math.max(tokens, 0)
    return allowed, remaining, retry_after, wait_for(capacity),
      remaining < capacity and wait_for(remaining + 1) or 0,
      { tokens = tokens, refilled_at = refilled_at }, delay
  end,

  save = function(keys, _, next, _, _, ttl)
    save_packed(keys.main, ttl, 't', TOKEN_BUCKET, next.tokens, next.refilled_at)
  end,
}
