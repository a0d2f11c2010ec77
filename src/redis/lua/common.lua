-- Shared by every script: the build puts it first, then one algorithm (or all six), then the
-- driver (check.lua or check_all.lua). Each algorithm mirrors src/core/algorithms.cc operation
-- for operation. Lua numbers are doubles; every value stays below 2^53, so the integer
-- arithmetic is exact, and sliding_window's double expression is evaluated in the same order.
--
-- An algorithm registers in `algorithms` a table of:
--   load(keys, now, a, b) -> state, present: the state to decide on (fresh when the key is
--     absent or holds another algorithm's state) and whether the key holds anything;
--   decide(state, keys, now, cost, a, b, max_delay) -> allowed, remaining (>= 0), retry_after,
--     reset_after, replenish_after, next [, delay]: reads only; `next` is the state after an
--     admission; `delay` (the meters only, which can book a slot up to max_delay ahead) is the
--     wait of a booking;
--   save(keys, state, next, now, cost, ttl): writes `next` after an admission with cost > 0;
--   tidy(keys, state, ttl), optional: rewrites a state that was decided on without consuming
--     into an equivalent, smaller one.
-- (a, b) are (count, period) for the window algorithms and (capacity, emission interval) for
-- the bucket algorithms; times are microseconds.
local algorithms = {}

-- C++'s int64 division, truncating toward zero; exact for operands below 2^53.
local function div(a, b)
  return (a - math.fmod(a, b)) / b
end

-- A peek (cost 0) is judged as a request for one unit.
local function units_judged(cost)
  return math.max(cost, 1)
end

-- The start of the epoch-aligned window holding `t`.
local function window_start(t, period)
  return t - math.fmod(t, period)
end

-- Integers as decimal strings: tostring() would give 1.7e+15.
local function int(n)
  return string.format('%d', n)
end

-- The caller's time when it passed one, else Redis TIME.
local function clock(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  -- Redis < 5 replicates a script as its source, which TIME makes nondeterministic: replicate
  -- its effects instead (the default, and a no-op, from Redis 5 on).
  redis.replicate_commands()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A meter's answer (Meter in algorithms.cc) to a request that fits now, or else would fit after
-- `wait`: allowed, delay (> 0: booked), retry_after when denied.
local function meter(fits_now, wait, cost, max_delay)
  if fits_now then
    return true, 0, 0
  end
  if cost > 0 and wait <= max_delay then
    return true, wait, 0
  end
  return false, 0, cost > 0 and wait - max_delay or wait
end

-- A string state is a tag byte then its fields packed little-endian: times in 7 bytes (below
-- 2^53), counts in 4 (at most 10^9). Short values are stored inside Redis's object allocation,
-- which keeps a key under 100 bytes. `older_format`, when given, is a shorter layout an earlier
-- version wrote with the same tag: such a value is unpacked with it, and the third result is
-- true.
local function load_packed(key, tag, format, older_format)
  local v = redis.pcall('GET', key) -- an error reply: the key holds sliding_log's sorted set
  if type(v) ~= 'string' then
    return nil, v ~= false
  end
  if string.sub(v, 1, 1) ~= tag then
    return nil, true
  end
  if older_format and #v == 1 + struct.size(older_format) then
    return { struct.unpack(older_format, v, 2) }, true, true
  end
  return { struct.unpack(format, v, 2) }, true
end

local function save_packed(key, ttl, tag, format, ...)
  redis.call('SET', key, tag .. struct.pack(format, ...), 'PX', ttl)
end

-- Milliseconds a key must outlive its state: reset_after rounded up, plus the margin (at least
-- 1 ms, which covers Redis's millisecond expiry clock lagging the microseconds of TIME).
local function ttl_ms(reset_after, margin)
  return div(reset_after + 999, 1000) + margin
end

local function decide(algorithm, keys, state, present, now, cost, a, b, max_delay)
  local allowed, remaining, retry_after, reset_after, replenish_after, next, delay =
    algorithm.decide(state, keys, now, cost, a, b, max_delay)
  return {
    allowed = allowed,
    remaining = remaining,
    retry_after = allowed and 0 or retry_after,
    reset_after = math.max(reset_after, 0),
    replenish_after = replenish_after,
    delay = delay or 0,
    state = state,
    present = present,
    next = next,
  }
end

-- Writes what a decision requires: the consumed state with its TTL after an admission; nothing
-- after a denial or a peek, except that a state equivalent to fresh is deleted.
local function commit(algorithm, keys, d, now, cost, margin)
  if d.allowed and cost > 0 then
    algorithm.save(keys, d.state, d.next, now, cost, ttl_ms(d.reset_after, margin))
  elseif d.reset_after == 0 then
    if d.present then
      if keys.aux then
        redis.call('DEL', keys.main, keys.aux)
      else
        redis.call('DEL', keys.main)
      end
    end
  elseif algorithm.tidy then
    algorithm.tidy(keys, d.state, ttl_ms(d.reset_after, margin))
  end
end

local function reply(d)
  return { d.allowed and 1 or 0, d.remaining, d.retry_after, d.reset_after, d.delay,
    d.replenish_after }
end
