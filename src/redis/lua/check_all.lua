-- Several limits on one request, all or nothing: every limit consumes if every one admits,
-- otherwise none does.
-- KEYS: per limit, its state key, then its auxiliary key if it has one (distinct limiter keys).
-- ARGV: now in µs ('' for Redis TIME), expiry margin in ms, the number of limits, then per
--   limit: algorithm name, how many keys it has (1 or 2), cost, and its two parameters.
-- Returns one {allowed, remaining, retry_after, reset_after, delay, replenish_after} per limit;
-- nothing is booked ahead (delay 0). When some limit refuses, a limit that would have admitted
-- reports what a peek sees, as refused with retry_after 0.
local now = clock(ARGV[1])
local margin = tonumber(ARGV[2])
local limits = {}
local all_allowed = true
local key = 1
for i = 1, tonumber(ARGV[3]) do
  local arg = 4 + (i - 1) * 5
  local key_count = tonumber(ARGV[arg + 1])
  local l = {
    algorithm = algorithms[ARGV[arg]],
    keys = { main = KEYS[key], aux = key_count == 2 and KEYS[key + 1] or nil },
    cost = tonumber(ARGV[arg + 2]),
    a = tonumber(ARGV[arg + 3]),
    b = tonumber(ARGV[arg + 4]),
  }
  key = key + key_count
  l.state, l.present = l.algorithm.load(l.keys, now, l.a, l.b)
  l.d = decide(l.algorithm, l.keys, l.state, l.present, now, l.cost, l.a, l.b, 0)
  all_allowed = all_allowed and l.d.allowed
  limits[i] = l
end
local replies = {}
for i, l in ipairs(limits) do
  if not all_allowed and l.d.allowed then
    l.cost = 0
    l.d = decide(l.algorithm, l.keys, l.state, l.present, now, 0, l.a, l.b, 0)
    l.d.allowed = false
    l.d.retry_after = 0
  end
  commit(l.algorithm, l.keys, l.d, now, l.cost, margin)
  replies[i] = reply(l.d)
end
return replies
