#!/usr/bin/env bash
# Side by side on one fresh redis-server (loopback, no persistence): the ceiling, redis-benchmark
# -P 32 running the very EVALSHA a sluice check sends, then `sluice bench` from one process.
# Usage: scripts/bench-redis.sh [ALGORITHM...]   (default: gcra fixed_window)
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

keys=100000
requests=1000000
for algorithm in "${algorithms[@]}"; do
  # The script exactly as sluice embeds it: common.lua, the algorithm, check.lua.
  sha=$(cat src/redis/lua/common.lua "src/redis/lua/$algorithm.lua" src/redis/lua/check.lua |
    redis-cli -p "$port" -x script load | tr -d '\r')
  # check.lua's ARGV: now ('' = Redis TIME), expiry margin ms, cost, then (count, period µs) for
  # the window algorithms or (capacity, emission interval µs) for the bucket ones: 1M per second.
  case "$algorithm" in
    fixed_window | sliding_window | sliding_log) a=1000000 b=1000000 ;;
    *) a=1000000 b=1 ;;
  esac
  redis-cli -p "$port" flushall >/dev/null
  ceiling=$(redis-benchmark -p "$port" -P 32 -c 50 -n "$requests" -r "$keys" -q \
    evalsha "$sha" 1 "sluice:bench:{bench:__rand_int__}" "" 1 1 "$a" "$b" |
    grep -oE '[0-9.]+ requests per second' | grep -oE '^[0-9.]+')
  redis-cli -p "$port" flushall >/dev/null
  ours=$("$sluice" bench --store "redis://127.0.0.1:$port" --algorithm "$algorithm" \
    --keys "$keys" --concurrency "${CONCURRENCY:-64}" --duration 10s --limit 1000000 --period 1s --json)
  echo "$algorithm: redis-benchmark -P 32 ceiling $ceiling evalsha/s; sluice bench $ours"
done
