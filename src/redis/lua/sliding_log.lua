-- sliding_log: a sorted set of admissions (score: admission time; member "time:cost", one per
-- instant: simultaneous admissions are merged, as in the C++ log, which keeps members unique),
-- and in the auxiliary key the sum of their costs.
local SLIDING_LOG_PAGE = 64

local function entry_cost(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

local function sum_costs(members)
  local sum = 0
  for _, m in ipairs(members) do
    sum = sum + entry_cost(m)
  end
  return sum
end

algorithms.sliding_log = {
  load = function(keys, now, _, period)
    local kind = redis.call('TYPE', keys.main)['ok']
    if kind ~= 'zset' then
      return { total = 0, stale = 0, other = kind ~= 'none' }, kind ~= 'none'
    end
    -- Entries at or before the horizon have left the window.
    local horizon = now - period
    local stale = redis.call('ZRANGEBYSCORE', keys.main, '-inf', int(horizon))
    local total = tonumber(redis.call('GET', keys.aux))
    if not total then
      -- The total outlives the set it counts unless something else removed it (an eviction
      -- policy): count again.
      total = sum_costs(redis.call('ZRANGE', keys.main, 0, -1))
    end
    return { total = total - sum_costs(stale), stale = #stale, horizon = horizon, zset = true }, true
  end,

  decide = function(s, keys, now, cost, count, period)
    local units = units_judged(cost)
    local allowed = s.total + units <= count
    local total, retry_after = s.total, 0
    if allowed and cost > 0 then
      total = total + cost
    elseif not allowed then
      -- Wait for the oldest entries to leave the window until enough units are freed.
      local excess = total + units - count
      local freed, offset, found = 0, 0, false
      while not found do
        local page = redis.call('ZRANGEBYSCORE', keys.main, '(' .. int(s.horizon), '+inf',
          'WITHSCORES', 'LIMIT', offset, SLIDING_LOG_PAGE)
        if #page == 0 then
          break
        end
        for i = 1, #page, 2 do
          freed = freed + entry_cost(page[i])
          if freed >= excess then
            retry_after = tonumber(page[i + 1]) + period - now
            found = true
            break
          end
        end
        offset = offset + SLIDING_LOG_PAGE
      end
    end
    local newest = (allowed and cost > 0) and now or nil
    if s.zset then
      local last = redis.call('ZRANGE', keys.main, -1, -1, 'WITHSCORES')
      local at = tonumber(last[2])
      if at and at > s.horizon and (not newest or at > newest) then
        newest = at
      end
    end
    return allowed, count - total, retry_after, newest and newest + period - now or 0,
      { total = total }
  end,

  save = function(keys, s, next, now, cost, ttl)
    if s.other then
      redis.call('DEL', keys.main)
    end
    if s.stale > 0 then
      redis.call('ZREMRANGEBYSCORE', keys.main, '-inf', int(s.horizon))
    end
    local at = int(now)
    local same = s.zset and redis.call('ZRANGEBYSCORE', keys.main, at, at)[1]
    if same then
      redis.call('ZREM', keys.main, same)
      cost = cost + entry_cost(same)
    end
    redis.call('ZADD', keys.main, at, at .. ':' .. int(cost))
    -- The total is written last, with the same TTL, so it never expires before the set.
    redis.call('PEXPIRE', keys.main, ttl)
    redis.call('SET', keys.aux, int(next.total), 'PX', ttl)
  end,

  tidy = function(keys, s, ttl)
    if s.stale == 0 then
      return
    end
    redis.call('ZREMRANGEBYSCORE', keys.main, '-inf', int(s.horizon))
    redis.call('PEXPIRE', keys.main, ttl)
    redis.call('SET', keys.aux, int(s.total), 'PX', ttl)
  end,
}
