#!/usr/bin/env bash
# Redis over TLS against plain TCP, side by side on one fresh redis-server (loopback, no
# persistence) listening on both a plain and a TLS port (certificates made here by openssl, an
# RSA 2048 key, TLS 1.3): rounds alternate plain and TLS, each a `sluice bench` with coalescing
# (the default --coalesce-max 64) after FLUSHALL. Printed per round and as medians: decisions/s,
# p99 latency, sluice bench's CPU (user + system, /usr/bin/time) per decision, Redis's (INFO cpu)
# per decision, the errors, and each round's ratios TLS / plain with their medians. Every limit is 1 000 000 per second: every check is
# admitted.
#
# Usage: [ROUNDS=5] [DURATION=5s] [CONCURRENCY=256] [ALGORITHM=gcra] [SLUICE=build/release/sluice]
#        scripts/bench-tls.sh
set -euo pipefail
rounds=${ROUNDS:-5} duration=${DURATION:-5s} concurrency=${CONCURRENCY:-256}
algorithm=${ALGORITHM:-gcra} sluice=${SLUICE:-build/release/sluice}
dir=$(mktemp -d)
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port) tls_port=$(free_port)
(
  cd "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA"
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
  echo "subjectAltName=IP:127.0.0.1" >ext.cnf
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
    -days 2 -extfile ext.cnf
) >/dev/null 2>&1
redis-server --port "$port" --tls-port "$tls_port" --bind 127.0.0.1 --save '' --appendonly no \
  --tls-cert-file "$dir/server.pem" --tls-key-file "$dir/server.key" \
  --tls-ca-cert-file "$dir/ca.pem" --tls-auth-clients no --dir "$dir" \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null
stop_redis_server() {
  local pid
  pid=$(cat "$dir/redis.pid" 2>/dev/null) && kill "$pid" 2>/dev/null &&
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -rf "$dir"
}
trap stop_redis_server EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
redis_cpu() { cli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "redis-server $(redis-server --version | grep -oE 'v=[0-9.]+'), $(nproc) cores," \
  "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A rate=() p99=() cpu=() rcpu=() errors=()
rate_ratio="" cpu_ratio=""
for round in $(seq "$rounds"); do
  for variant in plain tls; do
    store=(--store "redis://127.0.0.1:$port")
    [ "$variant" = tls ] && store=(--store "rediss://127.0.0.1:$tls_port" --tls-ca-file "$dir/ca.pem")
    cli flushall >/dev/null
    before=$(redis_cpu)
    out=$(/usr/bin/time -f '%U %S' -o "$dir/time" "$sluice" bench "${store[@]}" \
      --algorithm "$algorithm" --keys 100000 --concurrency "$concurrency" --duration "$duration" \
      --limit 1000000 --period 1s --json)
    field() { python3 -c 'import json,sys; print("%.0f" % json.loads(sys.argv[1])[sys.argv[2]])' "$out" "$1"; }
    decisions=$(field decisions)
    rate[$variant]+="$(field decisions_per_sec) "
    p99[$variant]+="$(field p99_us) "
    errors[$variant]+="$(field errors) "
    cpu[$variant]+="$(awk -v n="$decisions" '{printf "%.2f", ($1 + $2) * 1e6 / n}' "$dir/time") "
    rcpu[$variant]+="$(awk -v a="$before" -v b="$(redis_cpu)" -v n="$decisions" 'BEGIN {printf "%.2f", (b - a) * 1e6 / n}') "
  done
  rp=$(awk '{print $NF}' <<<"${rate[plain]}") rt=$(awk '{print $NF}' <<<"${rate[tls]}")
  cp=$(awk '{print $NF}' <<<"${cpu[plain]}") ct=$(awk '{print $NF}' <<<"${cpu[tls]}")
  rate_ratio+="$(awk -v a="$rt" -v b="$rp" 'BEGIN {printf "%.2f", a / b}') "
  cpu_ratio+="$(awk -v a="$ct" -v b="$cp" 'BEGIN {printf "%.2f", a / b}') "
  echo "round $round: plain $rp/s, tls $rt/s"
done
for v in plain tls; do
  printf '%s %-5s decisions/s %s(median %s); p99 us %s(median %s); client CPU us/decision %s(median %s); Redis CPU us/decision %s(median %s); errors %s\n' \
    "$algorithm" "$v" "${rate[$v]}" "$(median <<<"${rate[$v]}")" "${p99[$v]}" \
    "$(median <<<"${p99[$v]}")" "${cpu[$v]}" "$(median <<<"${cpu[$v]}")" "${rcpu[$v]}" \
    "$(median <<<"${rcpu[$v]}")" "${errors[$v]}"
done
echo "TLS / plain, per round: decisions/s ${rate_ratio}(median $(median <<<"$rate_ratio"));" \
  "client CPU per decision ${cpu_ratio}(median $(median <<<"$cpu_ratio"))"
