-- The reference for scripts/bench-scripts.sh: token_bucket written the shortest way for sluice's
-- check script's keys, arguments, reply and stored state ('t', then the tokens and the time they
-- were refilled to packed '<i4I7'), with every behaviour of Decide(TokenBucketState) in
-- src/core/algorithms.cc.
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local capacity, interval, max_delay = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

local stored = redis.pcall('GET', key)
local tokens, refilled_at = capacity, now
if type(stored) == 'string' and #stored == 12 and string.byte(stored) == 116 then
  local t, at = struct.unpack('<i4I7', stored, 2)
  -- Within the bounds of a state sluice writes, else a foreign state.
  if t >= -math.floor(94867200000000 / interval) and t <= 1000000000
    and at <= now + 94867200000000 then
    tokens, refilled_at = t, at
  end
end
if tokens >= capacity then
  tokens, refilled_at = capacity, now
elseif now > refilled_at then
  local earned = math.floor((now - refilled_at) / interval)
  tokens = math.min(capacity, tokens + earned)
  refilled_at = tokens == capacity and now or refilled_at + earned * interval
end
local into_next_token = now - refilled_at
local units = math.max(cost, 1)
local allowed, delay, retry_after = true, 0, 0
if tokens < units then
  local wait = (units - tokens) * interval - into_next_token
  if cost > 0 and wait <= max_delay then
    delay = wait
  else
    allowed = false
    retry_after = cost > 0 and wait - max_delay or wait
  end
end
if allowed then
  tokens = tokens - cost
end
local remaining = math.max(tokens, 0)
local replenish_after = 0
if remaining < capacity then
  replenish_after = (remaining + 1 - tokens) * interval - into_next_token
end
local reset_after = math.max((capacity - tokens) * interval - into_next_token, 0)
if allowed and cost > 0 then
  redis.call('SET', key, 't' .. struct.pack('<i4I7', tokens, refilled_at), 'PX',
    string.format('%d', math.floor((reset_after + 999) / 1000) + margin))
elseif reset_after == 0 and stored then
  redis.call('DEL', key)
end
return { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
