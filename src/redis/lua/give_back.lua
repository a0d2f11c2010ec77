-- Gives units back to a meter's state (Store::GiveBack), with the one meter this script was built
-- with. Its KEYS, ARGV and reply are written in src/redis/script_call.h.
local key = KEYS[1]
--@insert clock
local margin, units = tonumber(ARGV[2]), tonumber(ARGV[3])
local a, b = tonumber(ARGV[4]), tonumber(ARGV[5])
-- Applied after its apply_by: a unit less per emission interval, or part of one, past it.
local apply_by = tonumber(ARGV[6])
if apply_by and now > apply_by then
  units = units - math.ceil((now - apply_by) / b)
end
--@insert load
if not held then
  return 0 -- no state, or another algorithm's: left as it is
end
if units <= 0 then
  return 1 -- all of it came too late: left as it is
end
--@insert give_back
-- Written as a check's commit writes a state: with its TTL, or deleted once it is fresh.
if reset_after > 0 then
  --@insert ttl
  --@insert save
else
  redis.call('DEL', key)
end
return 1
