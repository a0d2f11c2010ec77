-- Several limits on one request, all or nothing: every limit consumes if every one admits,
-- otherwise none does.
-- KEYS: per limit, its state key, then its auxiliary key if it has one (distinct limiter keys).
-- ARGV: now in µs ('' for Redis TIME), expiry margin in ms, the number of limits, then per
--   limit: algorithm name, how many keys it has (1 or 2), cost, and its two parameters.
-- Returns one {allowed, remaining, retry_after, reset_after, delay, replenish_after} per limit;
-- nothing is booked ahead (delay 0). When some limit refuses, a limit that would have admitted
-- reports what a peek sees, as refused with retry_after 0.
--@insert clock
local margin = tonumber(ARGV[2])

-- Per algorithm: loads one limit's state, and returns its decision for a cost, which also writes
-- what the decision requires when `write` is true. The build repeats this block for each
-- algorithm, its name in place of ALGORITHM.
local checks = {}
--@for_each_algorithm
checks.ALGORITHM = function(key, aux, a, b)
  --@insert load
  return function(cost, write)
    local max_delay = 0
    --@insert decide
    --@insert decision
    if write then
      --@insert commit
    end
    return allowed, remaining, retry_after, reset_after, delay, replenish_after
  end
end
--@end_for_each

local limits = {}
local all_allowed = true
local key = 1
for i = 1, tonumber(ARGV[3]) do
  local arg = 4 + (i - 1) * 5
  local key_count = tonumber(ARGV[arg + 1])
  local decide = checks[ARGV[arg]](KEYS[key], key_count == 2 and KEYS[key + 1] or nil,
    tonumber(ARGV[arg + 3]), tonumber(ARGV[arg + 4]))
  local cost = tonumber(ARGV[arg + 2])
  key = key + key_count
  limits[i] = { decide = decide, cost = cost, allowed = decide(cost, false) }
  all_allowed = all_allowed and limits[i].allowed
end
local replies = {}
for i, l in ipairs(limits) do
  local peek = not all_allowed and l.allowed
  local allowed, remaining, retry_after, reset_after, delay, replenish_after =
    l.decide(peek and 0 or l.cost, true)
  if peek then
    allowed, retry_after = false, 0
  end
  replies[i] = { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
end
return replies
