#!/usr/bin/env bash
# `sluice bench`, one workload, side by side: a Redis Cluster of 3 masters (REPLICAS replicas
# each, default 0) and a single redis-server, all on this machine (loopback, no persistence).
# Rounds are interleaved so both see the same noise; medians are reported, with the sluice
# process's CPU time per decision (user + system), which is where cluster routing costs.
# Usage: [ROUNDS=3] [ALGORITHM=gcra] [KEYS=10000] [CONCURRENCY=64] [DURATION=10s] [REPLICAS=0]
#        [IO_THREADS=1] [CONNECTIONS=n] scripts/bench-cluster.sh
# CONNECTIONS (per I/O thread to each node) unset: each store's default, 2 to the single server
# and 1 to each master of the cluster.
# Needs a release build: cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build/release
set -euo pipefail
cd "$(dirname "$0")/.."
sluice=${SLUICE:-build/release/sluice}
[ -x "$sluice" ] || { echo "build $sluice first (see the usage line)" >&2; exit 2; }
rounds=${ROUNDS:-3}
replicas=${REPLICAS:-0}
workload=(--algorithm "${ALGORITHM:-gcra}" --keys "${KEYS:-10000}" --concurrency "${CONCURRENCY:-64}"
  --duration "${DURATION:-10s}" --io-threads "${IO_THREADS:-1}"
  --connections "${CONNECTIONS:-0}" --limit 1000000 --period 1s --json)

dir=$(mktemp -d)
pidfiles=()
cleanup() {
  for f in "${pidfiles[@]}"; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
base=$((20000 + RANDOM % 20000))
# start_redis PORT [ARGS...]: a redis-server in its own directory.
start_redis() {
  local port=$1
  shift
  mkdir -p "$dir/$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$port" \
    --daemonize yes --logfile "$dir/$port/redis.log" --pidfile "$dir/$port/redis.pid" "$@"
  pidfiles+=("$dir/$port/redis.pid")
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "redis-server on $port did not start" >&2
  exit 1
}

single=$base
start_redis "$single"
nodes=()
for i in $(seq $((3 * (1 + replicas)))); do
  port=$((base + i))
  start_redis "$port" --cluster-enabled yes --cluster-config-file nodes.conf \
    --repl-diskless-sync-delay 0
  nodes+=("127.0.0.1:$port")
done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes >/dev/null
for _ in $(seq 100); do
  ok=0
  for n in "${nodes[@]}"; do
    redis-cli -p "${n#*:}" cluster info | grep -q cluster_state:ok && ok=$((ok + 1))
  done
  [ "$ok" = "${#nodes[@]}" ] && break
  sleep 0.1
done
[ "$ok" = "${#nodes[@]}" ] || { echo "the cluster did not become healthy" >&2; exit 1; }
cluster_url="redis+cluster://$(IFS=,; echo "${nodes[*]}")"

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
field() { grep -oE "\"$1\":[0-9.]+" | cut -d: -f2; }
flush() {
  redis-cli -p "$single" flushall >/dev/null
  for n in "${nodes[@]}"; do redis-cli -p "${n#*:}" flushall >/dev/null 2>&1 || true; done
}
# run NAME URL: one `sluice bench`, its JSON and CPU seconds appended to NAME's lists.
declare -A rates p50s p99s cpus
run() {
  local name=$1 url=$2 json cpu
  flush
  TIMEFORMAT='%U %S'
  { time "$sluice" bench --store "$url" "${workload[@]}" >"$dir/out.json" 2>&1; } 2>"$dir/time"
  json=$(cat "$dir/out.json")
  cpu=$(awk '{print $1 + $2}' "$dir/time")
  local decisions
  decisions=$(field decisions <<<"$json")
  rates[$name]+="$(field decisions_per_sec <<<"$json") "
  p50s[$name]+="$(field p50_us <<<"$json") "
  p99s[$name]+="$(field p99_us <<<"$json") "
  cpus[$name]+="$(awk -v c="$cpu" -v d="$decisions" 'BEGIN {printf "%.2f", 1e6 * c / d}') "
  echo "$name: $json cpu ${cpu}s"
}
for round in $(seq "$rounds"); do
  echo "round $round"
  run single "redis://127.0.0.1:$single"
  run cluster "$cluster_url"
done
echo
echo "median of $rounds rounds; ${workload[*]}; cluster: 3 masters, $replicas replicas each"
for name in single cluster; do
  m() { tr ' ' '\n' <<<"$1" | grep . | median; }
  echo "$name: $(m "${rates[$name]}") decisions/s, p50 $(m "${p50s[$name]}") us," \
    "p99 $(m "${p99s[$name]}") us, sluice CPU $(m "${cpus[$name]}") us/decision"
done
