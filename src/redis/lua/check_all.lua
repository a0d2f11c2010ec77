-- Several checks all or nothing: the checks whose keys one node holds. Its KEYS, ARGV, modes
-- ('charge', 'peek') and reply are written in src/redis/script_call.h. KEYS serve the routing
-- only: every key is named in ARGV.
local peek = ARGV[1] == 'peek'
local limits = {}
local arg = 2
while arg <= #ARGV do
  local key_count = tonumber(ARGV[arg + 1])
  local check = arg + 2 + key_count -- the check's six arguments
  limits[#limits + 1] = {
    algorithm = algorithms[ARGV[arg]],
    keys = { main = ARGV[arg + 2], aux = key_count == 2 and ARGV[arg + 3] or nil },
    now = ARGV[check],
    margin = tonumber(ARGV[check + 1]),
    cost = tonumber(ARGV[check + 2]),
    a = tonumber(ARGV[check + 3]),
    b = tonumber(ARGV[check + 4]),
  }
  arg = check + 6
end
-- Keys outside KEYS' slot are checked by Redis Cluster one command at a time: one the node does
-- not hold fails the script here, before anything is written.
for _, l in ipairs(limits) do
  redis.call('EXISTS', l.keys.main)
  if l.keys.aux then
    redis.call('EXISTS', l.keys.aux)
  end
end
local now = clock(limits[1].now)
local margin = limits[1].margin
local all_allowed = true
for _, l in ipairs(limits) do
  l.state, l.present = l.algorithm.load(l.keys, now, l.a, l.b)
  l.d = decide(l.algorithm, l.keys, l.state, l.present, now, l.cost, l.a, l.b, 0)
  all_allowed = all_allowed and l.d.allowed
end
local replies = {}
for i, l in ipairs(limits) do
  if (peek or not all_allowed) and l.d.allowed then
    l.cost = 0
    l.d = decide(l.algorithm, l.keys, l.state, l.present, now, 0, l.a, l.b, 0)
    l.d.allowed = peek
    l.d.retry_after = 0
  end
  if not peek then
    commit(l.algorithm, l.keys, l.d, now, l.cost, margin)
  end
  replies[i] = reply(l.d)
end
return replies
