-- wrk script: POST /v1/check for one of 100 000 keys, chosen at random.
-- wrk -t1 -c64 -d10s --latency -s bench/wrk/check.lua http://127.0.0.1:8080/v1/check
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
math.randomseed(42)
request = function()
  local body = string.format('{"rule":"bench","key":"user:%d","cost":1}', math.random(0, 99999))
  return wrk.format(nil, nil, nil, body)
end
