-- sliding_log: a sorted set with one entry per admission instant (simultaneous admissions are
-- merged, as in the C++ log): score = admission time, member = the running count of the units
-- admitted to the key up to this entry, included, modulo 2^32. The counts grow along the log and
-- a log holds at most 10^5 units, so the members within it are unique and in order. The auxiliary
-- key holds the running count of the units that left the log. An entry's cost is its count minus
-- the previous one's, the units in the window are the newest count minus those that left, and
-- the entry after which enough units have left is found by bisection over ranks: every call
-- costs O(log n) Redis commands of O(log n) each, plus the entries that leave, however full the
-- log.
local COUNT_MODULUS = 4294967296

-- The units between two running counts (Lua's % is floored: never negative).
local function units_between(from, to)
  return (to - from) % COUNT_MODULUS
end

-- The entry of rank `rank` (0 = oldest): its time and running count.
local function log_entry(key, rank)
  local e = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  return tonumber(e[2]), tonumber(e[1])
end

-- The time of the first entry of ranks [lo, hi] whose running count is `need` past `left`; the
-- entry of rank `hi` must be. Most often it is the oldest, looked at first.
local function first_reaching(key, lo, hi, left, need)
  local at, count = log_entry(key, lo)
  if units_between(left, count) >= need then
    return at
  end
  lo = lo + 1
  while lo < hi do
    local mid = lo + div(hi - lo, 2)
    local _, count = log_entry(key, mid)
    if units_between(left, count) >= need then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return (log_entry(key, lo))
end

-- A log an earlier version wrote ("time:cost" members, the total in the auxiliary key) is
-- rewritten in this format in place, once, reading its live entries: O(n), the one call that is.
local function convert_earlier_log(keys, now, period)
  redis.call('ZREMRANGEBYSCORE', keys.main, '-inf', int(now - period))
  local old = redis.call('ZRANGE', keys.main, 0, -1, 'WITHSCORES')
  if #old == 0 then
    return
  end
  local ttl = redis.call('PTTL', keys.main)
  if ttl < 1 then
    ttl = div(tonumber(old[#old]) + period - now + 999, 1000) + 1
  end
  redis.call('DEL', keys.main)
  local running, batch = 0, {}
  for i = 1, #old, 2 do
    running = running + tonumber(string.match(old[i], ':(%d+)$'))
    batch[#batch + 1] = old[i + 1]
    batch[#batch + 1] = int(running)
    if #batch == 2000 or i + 1 == #old then
      redis.call('ZADD', keys.main, unpack(batch))
      batch = {}
    end
  end
  redis.call('PEXPIRE', keys.main, ttl)
  redis.call('SET', keys.aux, '0', 'PX', ttl)
end

algorithms.sliding_log = {
  load = function(keys, now, count, period)
    local kind = redis.call('TYPE', keys.main)['ok']
    if kind == 'zset' and string.find(redis.call('ZRANGE', keys.main, 0, 0)[1], ':', 1, true) then
      convert_earlier_log(keys, now, period)
      kind = redis.call('TYPE', keys.main)['ok']
    end
    if kind ~= 'zset' then
      return { size = 0, first = 0, left = 0, total = 0, newest = 0, other = kind ~= 'none' },
        kind ~= 'none'
    end
    -- Entries at or before the horizon have left the window: ranks 0 .. first - 1.
    local horizon = now - period
    local size = redis.call('ZCARD', keys.main)
    local first = redis.call('ZCOUNT', keys.main, '-inf', int(horizon))
    local left
    if first > 0 then
      left = select(2, log_entry(keys.main, first - 1))
    else
      left = tonumber(redis.call('GET', keys.aux))
      if not left then
        -- The count that left was lost (an eviction policy removed the key): the oldest entry is
        -- taken to hold the whole limit, which admits nothing until it leaves.
        left = units_between(count, select(2, log_entry(keys.main, 0)))
      end
    end
    local newest_at, newest = log_entry(keys.main, size - 1)
    return { size = size, first = first, left = left, total = units_between(left, newest),
      newest_at = newest_at, newest = newest, horizon = horizon, zset = true }, true
  end,

  decide = function(s, keys, now, cost, count, period)
    local units = units_judged(cost)
    local total = s.total
    local allowed = total + units <= count
    -- The newest live entry's time; an admission joins that entry when it is at now (or later:
    -- the clock is behind it), else starts one at now.
    local newest_at = s.first < s.size and s.newest_at or nil
    if allowed and cost > 0 then
      total = total + cost
      if not newest_at or newest_at < now then
        newest_at = now
      end
    end
    -- The wait until `need` more units have left the window: the first entry whose running
    -- count reaches `need` past the units gone leaves P after it came; past the stored entries,
    -- it is the admission just made.
    local function wait_for(need)
      if need > s.total then
        return newest_at + period - now
      end
      return first_reaching(keys.main, s.first, s.size - 1, s.left, need) + period - now
    end
    local remaining = math.max(count - total, 0)
    return allowed, remaining, allowed and 0 or wait_for(total + units - count),
      newest_at and newest_at + period - now or 0,
      remaining < count and wait_for(total + remaining + 1 - count) or 0, { total = total }
  end,

  save = function(keys, s, _, now, cost, ttl)
    if s.other then
      redis.call('DEL', keys.main)
    end
    if s.first > 0 then
      redis.call('ZREMRANGEBYSCORE', keys.main, '-inf', int(s.horizon))
    end
    local running = (s.newest + cost) % COUNT_MODULUS
    if s.first < s.size and s.newest_at >= now then
      redis.call('ZREM', keys.main, int(s.newest))
      redis.call('ZADD', keys.main, int(s.newest_at), int(running))
    else
      redis.call('ZADD', keys.main, int(now), int(running))
    end
    -- The count that left is written last, with the same TTL, so it never expires before the set.
    redis.call('PEXPIRE', keys.main, ttl)
    redis.call('SET', keys.aux, int(s.left), 'PX', ttl)
  end,

  tidy = function(keys, s, ttl)
    if s.first == 0 then
      return
    end
    redis.call('ZREMRANGEBYSCORE', keys.main, '-inf', int(s.horizon))
    redis.call('PEXPIRE', keys.main, ttl)
    redis.call('SET', keys.aux, int(s.left), 'PX', ttl)
  end,
}
