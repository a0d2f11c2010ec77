-- The reference for scripts/bench-scripts.sh: sliding_log written the shortest way for sluice's
-- check script's keys, arguments, reply and stored state (a sorted set of admission times whose
-- members are the running counts of the units admitted, modulo 2^32; the auxiliary key holds the
-- running count of the units that left), with every behaviour of Decide(SlidingLogState) in
-- src/core/algorithms.cc: O(log n) commands, the entries that leave aside.
local key, aux = KEYS[1], KEYS[2]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local count, period = tonumber(ARGV[4]), tonumber(ARGV[5])
local modulus = 4294967296

local horizon = string.format('%d', now - period)
-- An error reply: the key holds another algorithm's string state.
local newest = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
local other = newest.err ~= nil
-- A running count as sluice writes it, else nil.
local function running_count(s)
  local n = tonumber(s)
  return n and n >= 0 and n < modulus and string.format('%d', n) == s and n or nil
end
-- The live entries (after the horizon) are the last `live` ranks; `dead`: some are not.
local live, dead, newest_count, newest_at, left = 0, false, 0, nil, 0
if newest[1] then
  newest_count = running_count(newest[1])
  local time = tonumber(newest[2])
  other = not (newest_count and time >= 0 and time <= now + 94867200000000 and time % 1 == 0)
  if not other then
    live = redis.call('ZCOUNT', key, '(' .. horizon, '+inf')
    local below, lost = newest_count, false
    if live == 0 then
      dead = true
    else
      newest_at = time
      local gone = redis.call('ZRANGE', key, -live - 1, -live - 1)[1]
      if gone then
        dead, below = true, running_count(gone)
      else
        local stored = redis.call('GET', aux)
        lost = not stored
        -- The count that left was lost: the oldest entry is taken to hold the whole limit.
        below = running_count(stored or redis.call('ZRANGE', key, 0, 0)[1])
      end
    end
    -- Out of the bounds of a log sluice writes (at most 10^5 units): a foreign state.
    other = not below or (newest_count - below) % modulus > 100000
    left = lost and below and (below - count) % modulus or below
  end
  if other then
    live, dead, newest_count, newest_at, left = 0, false, 0, nil, 0
  end
end
local total = (newest_count - left) % modulus

local units = math.max(cost, 1)
local allowed = total + units <= count
local admitted, at = total, newest_at
if allowed and cost > 0 then
  admitted = total + cost
  if not at or at < now then
    at = now
  end
end
-- The wait until `need` more units have left: the first live entry whose running count is
-- `need` past `left` leaves a period after it came (the oldest, looked at first, then bisection);
-- past the stored entries, it is the admission just made.
local function wait_for(need)
  if need > total then
    return at + period - now
  end
  local lo, hi = -live, -1
  local e = lo == -1 and newest or redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  if (tonumber(e[1]) - left) % modulus < need then
    lo = lo + 1
    while lo < hi do
      local mid = lo + math.floor((hi - lo) / 2)
      if (tonumber(redis.call('ZRANGE', key, mid, mid)[1]) - left) % modulus >= need then
        hi = mid
      else
        lo = mid + 1
      end
    end
    e = lo == -1 and newest or redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  end
  return tonumber(e[2]) + period - now
end
local remaining = math.max(count - admitted, 0)
local retry_after = allowed and 0 or wait_for(admitted + units - count)
local reset_after = at and at + period - now or 0
local replenish_after = remaining < count and wait_for(admitted + remaining + 1 - count) or 0

local ttl = string.format('%d', math.floor((reset_after + 999) / 1000) + margin)
if allowed and cost > 0 then
  if other then
    redis.call('DEL', key)
  end
  if dead then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon)
  end
  local running = string.format('%d', (newest_count + cost) % modulus)
  if newest_at and newest_at >= now then
    redis.call('ZREM', key, newest[1])
    redis.call('ZADD', key, newest[2], running)
  else
    redis.call('ZADD', key, string.format('%d', now), running)
  end
  redis.call('PEXPIRE', key, ttl)
  redis.call('SET', aux, string.format('%d', left), 'PX', ttl)
elseif reset_after == 0 then
  if other or newest[1] then
    redis.call('DEL', key, aux)
  end
elseif dead then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon)
  redis.call('PEXPIRE', key, ttl)
  redis.call('SET', aux, string.format('%d', left), 'PX', ttl)
end
return { allowed and 1 or 0, remaining, retry_after, reset_after, 0, replenish_after }
