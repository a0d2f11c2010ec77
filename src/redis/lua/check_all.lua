-- Several checks all or nothing: the checks whose keys one node holds. Its KEYS, ARGV, modes
-- ('charge', 'peek') and reply are written in src/redis/script_call.h. KEYS serve the routing
-- only: every key is named in ARGV.
--@insert clock
local margin = tonumber(ARGV[2])
local peek = ARGV[3] == 'peek'

-- Per algorithm: loads one check's state, and returns its decision for a cost, which also writes
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
local arg = 4
while arg <= #ARGV do
  local key_count = tonumber(ARGV[arg + 1])
  local at = arg + 2 + key_count -- the check's cost and parameters
  limits[#limits + 1] = {
    algorithm = ARGV[arg],
    key = ARGV[arg + 2],
    aux = key_count == 2 and ARGV[arg + 3] or nil,
    cost = tonumber(ARGV[at]),
    a = tonumber(ARGV[at + 1]),
    b = tonumber(ARGV[at + 2]),
  }
  arg = at + 3
end
-- Keys outside KEYS' slot are checked by Redis Cluster one command at a time: one the node does
-- not hold fails the script here, before anything is written (a load may rewrite an old state).
for _, l in ipairs(limits) do
  redis.call('EXISTS', l.key)
  if l.aux then
    redis.call('EXISTS', l.aux)
  end
end
local all_allowed = true
for _, l in ipairs(limits) do
  l.decide = checks[l.algorithm](l.key, l.aux, l.a, l.b)
  l.allowed = l.decide(l.cost, false)
  all_allowed = all_allowed and l.allowed
end
local replies = {}
for i, l in ipairs(limits) do
  -- A check that would admit, in a peek or beside a refusal, reports what a peek sees.
  local shown = (peek or not all_allowed) and l.allowed
  local allowed, remaining, retry_after, reset_after, delay, replenish_after =
    l.decide(shown and 0 or l.cost, not peek)
  if shown then
    allowed, retry_after = peek, 0
  end
  replies[i] = { allowed and 1 or 0, remaining, retry_after, reset_after, delay, replenish_after }
end
return replies
