#!/usr/bin/env bash
# What `sluice serve` as shipped answers, side by side on one fresh redis-server (loopback, no
# persistence), per round:
#   serve-redis    `sluice serve` on the Redis (resilient and leasing layers in place, as always),
#                  POST /v1/check from wrk, 64 connections, keys drawn from 100 000;
#   serve-memory   the same service on memory://;
#   bench-plain    `sluice bench` on the Redis, 64 checks in flight, 100 000 keys;
#   bench-resilient the same through a ResilientStore (--resilient).
# Every rule is gcra, 1 000 000 per second: every check is admitted. Each Redis run starts after
# FLUSHALL and CONFIG RESETSTAT; printed per variant: checks/s, p50 and p99 latency (µs), script
# calls per decision (EVALSHA calls in INFO commandstats over the decisions), and the decisions
# that failed or that a failure policy made instead of Redis (a call past its 50 ms deadline on
# a loaded machine): a run with many of those measured the policy, not Redis. For serve-*, also
# the CPU time per decision of the serve process and of redis-server (utime + stime in /proc over
# the run, in µs), which a machine shared with other work disturbs less than checks/s. Medians of
# the rounds are printed last, with the ratios the service is held to: of the medians, and the
# median of each round's ratio with the smallest and the largest. With BASELINE set to another
# sluice binary, each round also runs its serve-redis and serve-memory (base-serve-redis,
# base-serve-memory), so that two builds are compared in one run on one machine.
#
# Usage: [ROUNDS=3] [DURATION=5s] [CONNECTIONS=64] [SLUICE=build/release/sluice] [BASELINE=path]
#        scripts/bench-serve.sh
set -euo pipefail
rounds=${ROUNDS:-3} duration=${DURATION:-5s} connections=${CONNECTIONS:-64}
sluice=${SLUICE:-build/release/sluice} baseline=${BASELINE:-}
# shellcheck source=scripts/redis-server.sh
source "$(dirname "$0")/redis-server.sh"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
reset() { cli flushall >/dev/null && cli config resetstat >/dev/null; }
evalsha_calls() {
  cli info commandstats | tr -d '\r' | grep '^cmdstat_evalsha:' | grep -oE '[^_]calls=[0-9]+' |
    cut -d= -f2 || echo 0
}
# CPU time a process has used, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_us=$((1000000 / $(getconf CLK_TCK)))
sorted() { tr ' ' '\n' | grep . | sort -g; }
median() { sorted | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# The smallest and the largest of the numbers given: "min-max".
spread() { sorted | awk 'NR == 1 {min = $1} {max = $1} END {print min "-" max}'; }

cat >"$dir/check.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
math.randomseed(42)
request = function()
  local body = string.format('{"rule":"bench","key":"user:%d"}', math.random(0, 99999))
  return wrk.format(nil, nil, nil, body)
end
done = function(summary, latency, requests)
  local failed = summary.errors.status + summary.errors.connect + summary.errors.read +
      summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %d %d %.0f %.0f %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), failed))
end
EOF

# One round of `sluice serve` ($2) on $1 under wrk: "checks/s p50 p99 calls/decision failed
# serve-CPU-us/decision redis-CPU-us/decision".
serve_round() {
  local store=$1 binary=$2 listen
  listen=127.0.0.1:$(free_port)
  printf 'store: {url: "%s"}\nrules:\n  - { name: bench, algorithm: gcra, limit: 1000000, period: 1s }\n' \
    "$store" >"$dir/serve.yaml"
  "$binary" serve --config "$dir/serve.yaml" --listen "$listen" >"$dir/serve.log" 2>&1 &
  local serve=$!
  for _ in $(seq 100); do curl -sf "http://$listen/healthz" >/dev/null && break; sleep 0.1; done
  kill -0 "$serve" 2>/dev/null || { cat "$dir/serve.log" >&2; exit 1; }
  reset
  local result serve_cpu redis_cpu
  serve_cpu=$(cpu_ticks "$serve") redis_cpu=$(cpu_ticks "$(cat "$dir/redis.pid")")
  result=$(wrk -t1 -c"$connections" -d"$duration" -s "$dir/check.lua" "http://$listen/v1/check" |
    grep '^RESULT')
  serve_cpu=$(($(cpu_ticks "$serve") - serve_cpu))
  redis_cpu=$(($(cpu_ticks "$(cat "$dir/redis.pid")") - redis_cpu))
  # Decisions a failure policy made (Redis past its deadline on a loaded machine) count as failed.
  degraded=$(curl -sf "http://$listen/metrics" | grep -E '^sluice_decisions_total\{.*source="(fail_open|fail_closed|local_fallback)"' |
    awk '{n += $2} END {print n + 0}')
  kill "$serve" && wait "$serve" || true
  read -r _ requests usec p50 p99 failed <<<"$result"
  failed=$((failed + degraded))
  awk -v n="$requests" -v u="$usec" -v p50="$p50" -v p99="$p99" -v c="$(evalsha_calls)" \
    -v f="$failed" -v s=$((serve_cpu * tick_us)) -v r=$((redis_cpu * tick_us)) \
    'BEGIN {printf "%.0f %.0f %.0f %.3f %d %.1f %.1f\n", n * 1e6 / u, p50, p99, c / n, f, s / n, r / n}'
}

# One round of `sluice bench` on the Redis with flags $@: the same fields.
bench_round() {
  reset
  local out
  out=$("$sluice" bench --store "redis://127.0.0.1:$port" --algorithm gcra --keys 100000 \
    --concurrency "$connections" --duration "$duration" --limit 1000000 --period 1s --json "$@")
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); c=int(sys.argv[2]);
print("%.0f %.0f %.0f %.3f %d - -" % (d["decisions_per_sec"], d["p50_us"], d["p99_us"],
      c / max(d["decisions"], 1), d["errors"] + d.get("decided_by_policy", 0)))' "$out" "$(evalsha_calls)"
}

echo "redis-server $(redis-server --version | grep -oE 'v=[0-9.]+'), $(nproc) cores," \
  "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
variants=(serve-redis serve-memory bench-plain bench-resilient)
[[ -n $baseline ]] && variants+=(base-serve-redis base-serve-memory)
declare -A rate=() p50=() p99=() calls=() serve_us=() redis_us=() round_rate=()
serve_ratios="" bench_ratios=""
for round in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    case $v in
      serve-redis) line=$(serve_round "redis://127.0.0.1:$port" "$sluice") ;;
      serve-memory) line=$(serve_round "memory://" "$sluice") ;;
      base-serve-redis) line=$(serve_round "redis://127.0.0.1:$port" "$baseline") ;;
      base-serve-memory) line=$(serve_round "memory://" "$baseline") ;;
      bench-plain) line=$(bench_round) ;;
      bench-resilient) line=$(bench_round --resilient) ;;
    esac
    read -r r a b c f s u <<<"$line"
    cpu=""
    [[ $s == - ]] || cpu=", CPU/decision serve $s us, redis-server $u us"
    echo "round $round $v: checks/s $r, p50 ${a} us, p99 ${b} us, script calls/decision $c, failed $f$cpu"
    rate[$v]+="$r " p50[$v]+="$a " p99[$v]+="$b " calls[$v]+="$c " serve_us[$v]+="$s " redis_us[$v]+="$u "
    round_rate[$v]=$r
  done
  # Each round's ratios, of runs measured minutes apart at most: on a machine whose speed drifts
  # between rounds, their median says more than the ratio of the medians.
  round_ratio() { awk -v a="${round_rate[$1]}" -v b="${round_rate[$2]}" 'BEGIN {printf "%.3f", a / b}'; }
  serve_ratios+="$(round_ratio serve-redis serve-memory) "
  bench_ratios+="$(round_ratio bench-resilient bench-plain) "
done
for v in "${variants[@]}"; do
  cpu=""
  [[ ${serve_us[$v]} == -* ]] ||
    cpu=", CPU/decision serve $(median <<<"${serve_us[$v]}") us, redis-server $(median <<<"${redis_us[$v]}") us"
  printf '%-17s median checks/s %s, p50 %s us, p99 %s us, script calls/decision %s%s\n' "$v" \
    "$(median <<<"${rate[$v]}")" "$(median <<<"${p50[$v]}")" "$(median <<<"${p99[$v]}")" \
    "$(median <<<"${calls[$v]}")" "$cpu"
done
ratio() { awk -v a="$(median <<<"${rate[$1]}")" -v b="$(median <<<"${rate[$2]}")" 'BEGIN {printf "%.2f", a / b}'; }
echo "serve on Redis / serve on memory:// = $(ratio serve-redis serve-memory) (target >= 0.8)," \
  "median of the rounds' ratios $(median <<<"$serve_ratios") ($(spread <<<"$serve_ratios"))"
echo "bench --resilient / bench plain = $(ratio bench-resilient bench-plain) (target >= 0.9)," \
  "median of the rounds' ratios $(median <<<"$bench_ratios") ($(spread <<<"$bench_ratios"))"
[[ -z $baseline ]] || echo "baseline: serve on Redis / serve on memory:// = $(ratio base-serve-redis base-serve-memory)"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
