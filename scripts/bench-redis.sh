#!/usr/bin/env bash
# Side by side on one fresh redis-server (loopback, no persistence): the ceiling, redis-benchmark
# -P 32 running the very EVALSHA a sluice check sends, then `sluice bench` from one process.
# Usage: [ROUNDS=3] [CONCURRENCY=64] [IO_THREADS=1] [CONNECTIONS=2] scripts/bench-redis.sh
#        [ALGORITHM...]   (default: gcra fixed_window)
# Needs a release build: cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build/release
set -euo pipefail
cd "$(dirname "$0")/.."
sluice=build/release/sluice
[ -x "$sluice" ] || { echo "build $sluice first (see the usage line)" >&2; exit 2; }
algorithms=("$@")
((${#algorithms[@]})) || algorithms=(gcra fixed_window)

port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize yes --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
scripts/lua-scripts.sh . "$dir/scripts"

keys=100000
requests=1000000
rounds=${ROUNDS:-3}
client=(--io-threads "${IO_THREADS:-1}" --connections "${CONNECTIONS:-2}"
  --concurrency "${CONCURRENCY:-64}")
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
field() { grep -oE "\"$1\":[0-9.]+" | cut -d: -f2; }
for algorithm in "${algorithms[@]}"; do
  # The script exactly as sluice embeds it.
  sha=$(redis-cli -p "$port" -x script load <"$dir/scripts/$algorithm.lua" | tr -d '\r')
  # check.lua's ARGV: now ('' = Redis TIME), expiry margin ms, cost, then (count, period µs) for
  # the window algorithms or (capacity, emission interval µs) for the bucket ones: 1M per second;
  # then max_delay µs, 0: no reservation.
  case "$algorithm" in
    fixed_window | sliding_window | sliding_log) a=1000000 b=1000000 ;;
    *) a=1000000 b=1 ;;
  esac
  ceilings=() ours=() p50s=() p99s=()
  # Interleaved rounds, so both sides see the same noise; medians are reported.
  for round in $(seq "$rounds"); do
    redis-cli -p "$port" flushall >/dev/null
    ceilings+=("$(redis-benchmark -p "$port" -P 32 -c 50 -n "$requests" -r "$keys" -q \
      evalsha "$sha" 1 "sluice:bench:{bench:__rand_int__}" "" 1 1 "$a" "$b" 0 |
      grep -oE '[0-9.]+ requests per second' | grep -oE '^[0-9.]+')")
    redis-cli -p "$port" flushall >/dev/null
    json=$("$sluice" bench --store "redis://127.0.0.1:$port" --algorithm "$algorithm" \
      --keys "$keys" "${client[@]}" --duration 10s --limit 1000000 --period 1s --json)
    ours+=("$(field decisions_per_sec <<<"$json")")
    p50s+=("$(field p50_us <<<"$json")")
    p99s+=("$(field p99_us <<<"$json")")
    echo "$algorithm round $round: ceiling ${ceilings[-1]}/s; sluice bench $json"
  done
  c=$(printf '%s\n' "${ceilings[@]}" | median)
  o=$(printf '%s\n' "${ours[@]}" | median)
  echo "$algorithm median of $rounds: ceiling $c/s, sluice bench $o/s ($(awk -v o="$o" -v c="$c" \
    'BEGIN {printf "%.0f", 100 * o / c}')%), p50 $(printf '%s\n' "${p50s[@]}" | median) us," \
    "p99 $(printf '%s\n' "${p99s[@]}" | median) us"
done
