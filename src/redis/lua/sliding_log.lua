-- sliding_log: a sorted set with one entry per admission instant (simultaneous admissions are
-- merged, as in the C++ log): score = admission time, member = the running count of the units
-- admitted to the key up to this entry, included, modulo 2^32. The counts grow along the log and
-- a log holds at most 10^5 units, so the members within it are unique and in order. The auxiliary
-- key holds the running count of the units that left the log. An entry's cost is its count minus
-- the previous one's, the units in the window are the newest count minus those that left, and
-- the entry after which enough units have left is found by bisection over ranks: every call
-- costs O(log n) Redis commands of O(log n) each, plus the entries that leave, however full the
-- log. Running counts are subtracted modulo 2^32 (Lua's % is floored: never negative).

--@section load
local count, period = a, b
--@insert bounds
-- Entries at or before the horizon have left the window.
local horizon = string.format('%d', now - period)
-- An error reply: the key holds another algorithm's string state.
local newest = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[1] and string.find(newest[1], ':', 1, true) then
  -- A log an earlier version wrote ("time:cost" members, the total in the auxiliary key) is
  -- rewritten in this format in place, once, reading its live entries: O(n), the one call that
  -- is. One entry out of bounds makes it foreign (below): it is not rewritten.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon)
  local old = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local valid = true
  for i = 1, #old, 2 do
    local at, cost = tonumber(old[i + 1]), string.match(old[i], '^%d+:(%d+)$')
    cost = cost and tonumber(cost)
    if not (at and at >= 0 and at <= latest_time and at % 1 == 0 and cost and cost <= 100000) then
      valid = false
      break
    end
  end
  if valid and #old > 0 then
    local ttl = redis.call('PTTL', key)
    if ttl < 1 then
      ttl = math.floor((tonumber(old[#old]) + period - now + 999) / 1000) + 1
    end
    ttl = string.format('%d', ttl)
    redis.call('DEL', key)
    local running, batch = 0, {}
    for i = 1, #old, 2 do
      running = running + tonumber(string.match(old[i], ':(%d+)$'))
      batch[#batch + 1] = old[i + 1]
      batch[#batch + 1] = string.format('%d', running)
      if #batch == 2000 or i + 1 == #old then
        redis.call('ZADD', key, unpack(batch))
        batch = {}
      end
    end
    redis.call('PEXPIRE', key, ttl)
    redis.call('SET', aux, '0', 'PX', ttl)
  end
  newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
end
-- A foreign state: another algorithm's, or a log out of bounds (the bounds section; a running
-- count is a member as string.format('%d') writes it, below 2^32, and a log holds at most 10^5
-- units), which is read as empty, then deleted by the commit.
local foreign = newest.err ~= nil
local present = foreign or newest[1] ~= nil
-- The live entries are the last `live` ranks; `dead`: the log holds others. `left`: the running
-- count of the units that left, the newest dead entry's, else the auxiliary key's.
local live, dead, newest_count, newest_at, left = 0, false, 0, nil, 0
if newest[1] then
  newest_count = tonumber(newest[1])
  local newest_time = tonumber(newest[2])
  foreign = not (newest_count and newest_count >= 0 and newest_count < 4294967296
    and string.format('%d', newest_count) == newest[1] and newest_time and newest_time >= 0
    and newest_time <= latest_time and newest_time % 1 == 0)
  if not foreign then
    live = redis.call('ZCOUNT', key, '(' .. horizon, '+inf')
    -- The running count read below the newest entry's, as stored: left, or the oldest entry's.
    local below, lost = newest[1], false
    if live == 0 then
      dead = true
    else
      newest_at = newest_time
      below = redis.call('ZRANGE', key, -live - 1, -live - 1)[1]
      if below then
        dead = true
      else
        below = redis.call('GET', aux)
        if not below then
          -- The count that left was lost (an eviction policy removed the key): the oldest entry
          -- is taken to hold the whole limit, which admits nothing until it leaves.
          lost, below = true, redis.call('ZRANGE', key, 0, 0)[1]
        end
      end
    end
    left = tonumber(below)
    foreign = not (left and left >= 0 and left < 4294967296 and string.format('%d', left) == below
      and (newest_count - left) % 4294967296 <= 100000)
    if lost and not foreign then
      left = (left - count) % 4294967296
    end
  end
  if foreign then
    live, dead, newest_count, newest_at, left = 0, false, 0, nil, 0
  end
end
local total = (newest_count - left) % 4294967296

--@section decide
local units = math.max(cost, 1)
local allowed = total + units <= count
-- The newest live entry's time; an admission joins that entry when it is at now (or later: the
-- clock is behind it), else starts one at now.
local admitted, at = total, newest_at
if allowed and cost > 0 then
  admitted = total + cost
  if not at or at < now then
    at = now
  end
end
-- The wait until `need` more units have left the window: the first live entry whose running
-- count is `need` past `left` (most often the oldest, looked at first, else found by bisection)
-- leaves a period after it came; past the stored entries, it is the admission just made. The
-- entries between the oldest live one and the newest, whose scores lie between theirs, are not
-- checked by load: one that is not a running count reads as not far enough, which at worst finds
-- the newest entry (the wait until the whole log has left).
local function has_left(member, need)
  local n = tonumber(member)
  return n ~= nil and (n - left) % 4294967296 >= need
end
local function wait_for(need)
  if need > total then
    return at + period - now
  end
  local lo, hi = -live, -1
  local e = lo == -1 and newest or redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  if not has_left(e[1], need) then
    lo = lo + 1
    while lo < hi do
      local mid = lo + math.floor((hi - lo) / 2)
      if has_left(redis.call('ZRANGE', key, mid, mid)[1], need) then
        hi = mid
      else
        lo = mid + 1
      end
    end
    e = lo == -1 and newest or redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  end
  return math.ceil(tonumber(e[2])) + period - now
end
local remaining = math.max(count - admitted, 0)
local retry_after = allowed and 0 or wait_for(admitted + units - count)
local reset_after = at and at + period - now or 0
local replenish_after = remaining < count and wait_for(admitted + remaining + 1 - count) or 0
local delay = 0

--@section save
if foreign then
  redis.call('DEL', key)
end
if dead then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon)
end
local running = string.format('%d', (newest_count + cost) % 4294967296)
if newest_at and newest_at >= now then
  redis.call('ZREM', key, newest[1])
  redis.call('ZADD', key, newest[2], running)
else
  redis.call('ZADD', key, string.format('%d', now), running)
end
-- The count that left is written last, with the same TTL, so it never expires before the set.
redis.call('PEXPIRE', key, ttl)
redis.call('SET', aux, string.format('%d', left), 'PX', ttl)

--@section tidy
if dead then
  --@insert ttl
  redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon)
  redis.call('PEXPIRE', key, ttl)
  redis.call('SET', aux, string.format('%d', left), 'PX', ttl)
end
