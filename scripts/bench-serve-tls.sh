#!/usr/bin/env bash
# What TLS costs `sluice serve`, side by side per round on the memory store (no Redis in the way):
#   plain   POST /v1/check from wrk over HTTP keep-alive, CONNECTIONS connections;
#   tls     the same over HTTPS keep-alive (server.tls; TLS 1.3, the handshake once per
#           connection);
#   handshakes  new TLS handshakes a second (`openssl s_time -new`: one client, one full
#           handshake per connection, no session resumption).
# Every rule is gcra, 1 000 000 per second: every check is admitted. Also per variant: checks per
# second of the service's own CPU (user + system, from /proc), which leaves out what wrk spends on
# its side of TLS on the same cores. Medians of the rounds are printed last, with the ratios
# tls/plain (checks/s held to >= 0.8). The certificate is made for the run by openssl (EC P-256).
#
# Usage: [ROUNDS=5] [DURATION=5s] [CONNECTIONS=64] [IO_THREADS=2] [SLUICE=build/release/sluice] \
#   scripts/bench-serve-tls.sh
set -euo pipefail
rounds=${ROUNDS:-5} duration=${DURATION:-5s} connections=${CONNECTIONS:-64}
io_threads=${IO_THREADS:-2}
sluice=${SLUICE:-build/release/sluice}
dir=$(mktemp -d)
serve=
cleanup() {
  [[ -n $serve ]] && kill "$serve" 2>/dev/null && wait "$serve" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$dir/tls.key" -out "$dir/tls.crt" \
  2>/dev/null

cat >"$dir/check.lua" <<'LUA'
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
  io.write(string.format("RESULT %d %d %d\n", summary.requests, summary.duration, failed))
end
LUA

# Starts `sluice serve` with the extra server fields $1 on a free port; sets $serve and $listen.
start() {
  listen=127.0.0.1:$(free_port)
  printf 'store: {url: "memory://"}\nserver: {%s}\nrules:\n  - { name: bench, algorithm: gcra, limit: 1000000, period: 1s }\n' \
    "$1" >"$dir/serve.yaml"
  "$sluice" serve --config "$dir/serve.yaml" --listen "$listen" --io-threads "$io_threads" \
    >"$dir/serve.log" 2>&1 &
  serve=$!
  for _ in $(seq 100); do grep -q "serving on $listen" "$dir/serve.log" && break; sleep 0.1; done
  kill -0 "$serve" 2>/dev/null || { cat "$dir/serve.log" >&2; exit 1; }
}
stop() { kill "$serve" && wait "$serve" 2>/dev/null || true; serve=; }

# The CPU time of the service so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$serve/stat"; }

# "checks/s checks-per-CPU-second" from wrk against $1 (a URL); a run with failed requests is an
# error.
checks_per_second() {
  local result requests micros failed before after
  before=$(cpu_ticks)
  result=$(wrk -t1 -c"$connections" -d"$duration" -s "$dir/check.lua" "$1/v1/check" | grep '^RESULT')
  after=$(cpu_ticks)
  read -r _ requests micros failed <<<"$result"
  ((failed == 0)) || { echo "$failed failed requests against $1" >&2; exit 1; }
  echo "$((requests * 1000000 / micros)) $((requests * $(getconf CLK_TCK) / (after - before)))"
}

plain_all=() tls_all=() handshakes_all=() plain_cpu_all=() tls_cpu_all=()
for round in $(seq "$rounds"); do
  start ""
  read -r plain plain_cpu <<<"$(checks_per_second "http://$listen")"
  stop
  start "tls: {cert_file: $dir/tls.crt, key_file: $dir/tls.key}"
  read -r tls tls_cpu <<<"$(checks_per_second "https://$listen")"
  seconds=${duration%s}
  handshakes=$(openssl s_time -connect "$listen" -new -time "$seconds" 2>/dev/null |
    awk '/connections in [0-9.]+ real seconds/ {printf "%.0f", $1 / $4}')
  stop
  echo "round $round: plain $plain checks/s ($plain_cpu per CPU s), tls $tls checks/s" \
    "($tls_cpu per CPU s), $handshakes handshakes/s"
  plain_all+=("$plain") tls_all+=("$tls") handshakes_all+=("$handshakes")
  plain_cpu_all+=("$plain_cpu") tls_cpu_all+=("$tls_cpu")
done
plain=$(echo "${plain_all[*]}" | median)
tls=$(echo "${tls_all[*]}" | median)
plain_cpu=$(echo "${plain_cpu_all[*]}" | median)
tls_cpu=$(echo "${tls_cpu_all[*]}" | median)
handshakes=$(echo "${handshakes_all[*]}" | median)
ratio() { awk "BEGIN {printf \"%.2f\", $1 / $2}"; }
echo "median of $rounds rounds ($connections connections, $io_threads I/O threads):"
echo "  plain $plain checks/s, tls $tls checks/s: tls/plain $(ratio "$tls" "$plain") (held to >= 0.8)"
echo "  per CPU second of the service: plain $plain_cpu, tls $tls_cpu: tls/plain $(ratio "$tls_cpu" "$plain_cpu")"
echo "  new TLS handshakes: $handshakes/s (openssl s_time -new, one client)"
