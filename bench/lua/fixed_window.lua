-- The reference for scripts/bench-scripts.sh: fixed_window written the shortest way for sluice's
-- check script's keys, arguments, reply and stored state ('f', then the latest admission's time
-- and its window's count packed '<I7I4'), with every behaviour of Decide(FixedWindowState) in
-- src/core/algorithms.cc.
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local margin, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local count, period = tonumber(ARGV[4]), tonumber(ARGV[5])

local stored = redis.pcall('GET', key)
local latest, n = 0, 0
if type(stored) == 'string' and #stored == 12 and string.byte(stored) == 102 then
  latest, n = struct.unpack('<I7I4', stored, 2)
  -- Within the bounds of a state sluice writes, else a foreign state.
  if latest > now + 94867200000000 or n > 1000000000 then
    latest, n = 0, 0
  end
end
local start = math.max(now, latest)
start = start - start % period
if latest < start then
  n = 0
end
local allowed = n + math.max(cost, 1) <= count
if allowed then
  n = n + cost
end
local until_next_window = start + period - now
local wait = n > 0 and until_next_window or 0
if allowed and cost > 0 then
  redis.call('SET', key, 'f' .. struct.pack('<I7I4', math.max(now, latest), n), 'PX',
    string.format('%d', math.floor((wait + 999) / 1000) + margin))
elseif wait == 0 and stored then
  redis.call('DEL', key)
end
return { allowed and 1 or 0, math.max(count - n, 0), allowed and 0 or until_next_window, wait, 0,
  wait }
