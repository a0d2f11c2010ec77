-- The scripts are built from sections of Lua: a "--@section NAME" line starts one, and an
-- "--@insert NAME" line is replaced by that section, first the algorithm's, else this file's
-- (cmake/embed_lua.cmake). check.lua, the driver of one check, inserts them into straight-line
-- code: every EVALSHA runs the whole script body, so a function or table defined there is built
-- again on every call, and a check builds none but its reply and the searches of sliding_log and
-- sliding_window. check_all.lua, rarer, repeats its part per limit for each algorithm.
-- give_back.lua, a meter's give-back (Store::GiveBack), inserts load and the meter's give_back.
--
-- Each algorithm mirrors src/core/algorithms.cc operation for operation. Lua numbers are doubles;
-- every value stays below 2^53, so the integer arithmetic is exact (math.floor(x / y) is C++'s
-- x / y for x, y >= 0 with x + y below 2^53; `%` is floored, C++'s for x >= 0), and
-- sliding_window's double expression is evaluated in the same order. Integers passed to Redis are formatted with
-- string.format('%d'): tostring() gives 1.7e+15, and Redis 7.2.0-7.2.4 turn a Lua number into
-- the shortest string that reads back the same, 1e+8 for 100000000.
--
-- The locals the sections share (times in microseconds):
--   the driver's: key, aux (sliding_log's auxiliary key, else nil), now, margin (ms), then per
--     check cost, a, b (count and period for the window algorithms, capacity and emission
--     interval for the bucket ones) and max_delay (how far ahead a meter may book a slot);
--   read (in load; the driver's own when it has one): stored, the string `key` holds (false
--     when none), and present (false only when the key holds nothing);
--   bounds (in load): max_count, longest and latest_time, what a value read from a key may be;
--   load (reads the state of `key` as of `now`): present (the key holds anything), and the
--     algorithm's own, as for a fresh state when the key is absent or holds a foreign state
--     (another algorithm's, or values out of bounds: the bounds section); a meter's also held
--     (the key holds this algorithm's state, in bounds);
--   decide (reads only, and leaves load's locals as they were: check_all decides twice):
--     allowed, remaining (>= 0), retry_after, reset_after, replenish_after, delay (the wait of a
--     booking, 0 but for the meters);
--   save (after an admission with cost > 0): writes the state with `ttl`;
--   give_back (the meters', in give_back.lua only): gives `units` back to the state load read,
--     in save's locals, and sets reset_after (<= 0: the state is equivalent to fresh);
--   tidy (optional, after a decision that consumed nothing on a state that reset_after does not
--     find fresh): rewrites the state into an equivalent, smaller one.

--@section clock
-- The caller's time when it passed one, else Redis TIME.
local now = tonumber(ARGV[1])
if not now then
  -- Redis < 5 replicates a script as its source, which TIME makes nondeterministic: replicate
  -- its effects instead (the default, and a no-op, from Redis 5 on).
  redis.replicate_commands()
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end

--@section bounds
-- What a state sluice wrote can hold, whatever limit wrote it (core::InRange in state_range.cc):
-- counts up to Limit::kMaxCount; times from 0 to `longest`, core::kMaxStateAhead (3 x 366 days),
-- past now; a meter's units beyond its capacity (booked ahead, or above a burst lowered since) no
-- more than drain at its rate in `longest`. A load reads every value from a key through them
-- before any arithmetic: a packed state must have its tag and its exact length, a number kept as
-- a decimal string must be the one string.format('%d') writes for it (tonumber also reads 'nan',
-- 'inf', '1e300', '0x10', ' 5 '), and each field must be an integer within its bounds. Anything
-- else is a foreign state: decided as fresh, so that an admission rewrites the key with its TTL
-- and a peek deletes it.
local max_count, longest = 1000000000, 94867200000000
local latest_time = now + longest

--@section read
local stored = redis.pcall('GET', key) -- an error reply: the key holds sliding_log's sorted set
local present = stored ~= false

--@section meter
-- A meter's answer (Meter in algorithms.cc) to a request that fits now (`fits_now`), or else
-- would fit after `wait`.
local allowed, delay, retry_after = true, 0, 0
if not fits_now then
  if cost > 0 and wait <= max_delay then
    delay = wait
  else
    allowed = false
    retry_after = cost > 0 and wait - max_delay or wait
  end
end

--@section bucket_refill
-- token_bucket and leaky_bucket are one meter seen from two sides (Bucket in algorithms.cc): its
-- free units are the tokens, or the capacity less the level, and come back one an interval. Their
-- loads give stored_free and stored_at, the time of a partial unit. The bucket refilled to now, as
-- a check sees it: free, at.
local free, at = stored_free, stored_at
if free >= capacity then
  -- Full, or above a burst lowered since: the capacity, whose refill starts now.
  free, at = capacity, now
elseif now > at then
  local earned = math.floor((now - at) / interval)
  free = math.min(capacity, free + earned)
  at = free == capacity and now or at + earned * interval
end

--@section bucket_decide
--@insert bucket_refill
-- Negative when the clock is behind `at`: the next unit is that much further. Free units below
-- zero (booked ahead, or a level above a burst lowered since) come back before anything fits. The
-- wait until `u` units are free is (u - free) * interval - into_next_unit.
local into_next_unit = now - at
local units = math.max(cost, 1)
local fits_now, wait = free >= units, (units - free) * interval - into_next_unit
--@insert meter
if allowed then
  free = free - cost
end
local remaining = math.max(free, 0)
local reset_after = (capacity - free) * interval - into_next_unit
local replenish_after = 0
if remaining < capacity then
  replenish_after = (remaining + 1 - free) * interval - into_next_unit
end

--@section bucket_give_back
--@insert bucket_refill
free = math.min(capacity, free + units)
if free == capacity then
  at = now -- as a refill to full
end
local reset_after = (capacity - free) * interval - (now - at)

--@section decision
-- As MakeDecision in algorithms.cc.
if allowed then
  retry_after = 0
end
if reset_after < 0 then
  reset_after = 0
end

--@section ttl
-- Milliseconds a key must outlive its state: reset_after rounded up, plus the margin (at least
-- 1 ms, which covers Redis's millisecond expiry clock lagging the microseconds of TIME).
local ttl = string.format('%d', math.floor((reset_after + 999) / 1000) + margin)

--@section commit
-- Writes what a decision requires: the consumed state with its TTL after an admission; nothing
-- after a denial or a peek, except that a state equivalent to fresh is deleted.
if allowed and cost > 0 then
  --@insert ttl
  --@insert save
elseif reset_after == 0 then
  if present and aux then
    redis.call('DEL', key, aux)
  elseif present then
    redis.call('DEL', key)
  end
else
  --@insert tidy
end
