#!/usr/bin/env bash
# Many decisions per script call (coalescing), side by side on one fresh redis-server (loopback,
# no persistence), per algorithm and round:
#   ceiling   redis-benchmark -P 32 -c 50 -r 100000 of the single-check script (EVALSHA, Redis
#             TIME, keys drawn from 100 000): the most single calls one Redis serves;
#   single    sluice bench with --coalesce-max 1: one script call per check;
#   coalesced sluice bench with --coalesce-max 64 (the default);
#   before    with BEFORE=<an earlier build's sluice>: the same with that build, side by side.
# Each run starts after FLUSHALL and CONFIG RESETSTAT; printed: decisions/s, p99 latency, and the
# Redis µs per decision (evalsha's usec in INFO commandstats over the decisions), decisions per
# script call, sluice bench's CPU (user + system) per decision and its errors (a check past its
# 50 ms deadline on a loaded machine is one). Every limit is
# 1 000 000 per second: every check is admitted. Medians of the rounds are printed last.
#
# Usage: [ROUNDS=3] [DURATION=5s] [CONCURRENCY=256] [REQUESTS=2000000] [SLUICE=build/release/sluice]
#        [BEFORE=path/to/sluice] scripts/bench-coalesce.sh [ALGORITHM...]   (default: gcra fixed_window)
set -euo pipefail
rounds=${ROUNDS:-3} duration=${DURATION:-5s} concurrency=${CONCURRENCY:-256}
requests=${REQUESTS:-2000000} sluice=${SLUICE:-build/release/sluice}
algorithms=("$@")
variants=(single coalesced)
[ -n "${BEFORE:-}" ] && variants+=(before)
[ ${#algorithms[@]} -eq 0 ] && algorithms=(gcra fixed_window)
# shellcheck source=scripts/redis-server.sh
source "$(dirname "$0")/redis-server.sh"
scripts/lua-scripts.sh . "$dir/lua"

# (count, period µs) for the windows, (capacity, emission interval µs) for the meters.
parameters() { case "$1" in *window | sliding_log) echo "1000000 1000000" ;; *) echo "1000000 1" ;; esac; }
reset() { cli flushall >/dev/null && cli config resetstat >/dev/null; }
evalsha_usec() {
  cli info commandstats | tr -d '\r' | grep '^cmdstat_evalsha:' | grep -oE '[^_]usec=[0-9]+' |
    cut -d= -f2
}
evalsha_calls() {
  cli info commandstats | tr -d '\r' | grep '^cmdstat_evalsha:' | grep -oE '[^_]calls=[0-9]+' |
    cut -d= -f2
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "redis-server $(redis-server --version | grep -oE 'v=[0-9.]+'), $(nproc) cores," \
  "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for algorithm in "${algorithms[@]}"; do
  read -r a b < <(parameters "$algorithm")
  sha=$(cli -x script load <"$dir/lua/$algorithm.lua" | tr -d '\r')
  declare -A rate=() p99=() usec=() calls=([ceiling]=1) errors=([ceiling]=0) cpu=([ceiling]=-)
  for round in $(seq "$rounds"); do
    reset
    cli -x script load <"$dir/lua/$algorithm.lua" >/dev/null
    csv=$(redis-benchmark -p "$port" -P 32 -c 50 -r 100000 -n "$requests" --csv \
      EVALSHA "$sha" 1 'sluice:bench:{__rand_int__}' '' 1 1 "$a" "$b" 0 | tail -1 | tr -d '"')
    r=$(cut -d, -f2 <<<"$csv")
    rate[ceiling]+="$r "
    p99[ceiling]+="$(awk -F, '{printf "%.0f", $7 * 1000}' <<<"$csv") "
    usec[ceiling]+="$(awk -v u="$(evalsha_usec)" -v n="$requests" 'BEGIN {printf "%.2f", u / n}') "
    for variant in "${variants[@]}"; do
      max=64 binary=$sluice
      [ "$variant" = single ] && max=1
      [ "$variant" = before ] && binary=$BEFORE
      reset
      out=$(/usr/bin/time -f '%U %S' -o "$dir/time" "$binary" bench --store "redis://127.0.0.1:$port" --algorithm "$algorithm" \
        --keys 100000 --concurrency "$concurrency" --duration "$duration" --limit "$a" \
        --period 1s --coalesce-max "$max" --json)
      field() { python3 -c 'import json,sys; print("%.0f" % json.loads(sys.argv[1])[sys.argv[2]])' "$out" "$1"; }
      decisions=$(field decisions)
      errors[$variant]+="$(field errors) "
      cpu[$variant]+="$(awk -v n="$decisions" '{printf "%.2f", ($1 + $2) * 1e6 / n}' "$dir/time") "
      rate[$variant]+="$(field decisions_per_sec) "
      p99[$variant]+="$(field p99_us) "
      usec[$variant]+="$(awk -v u="$(evalsha_usec)" -v n="$decisions" 'BEGIN {printf "%.2f", u / n}') "
      calls[$variant]+="$(awk -v c="$(evalsha_calls)" -v n="$decisions" 'BEGIN {printf "%.1f", n / c}') "
    done
  done
  for v in ceiling "${variants[@]}"; do
    printf '%s %-9s decisions/s %s(median %s); p99 us %s(median %s); Redis us/decision %s(median %s); decisions/call %s; client CPU us/decision %s; errors %s\n' \
      "$algorithm" "$v" "${rate[$v]}" "$(median <<<"${rate[$v]}")" "${p99[$v]}" \
      "$(median <<<"${p99[$v]}")" "${usec[$v]}" "$(median <<<"${usec[$v]}")" \
      "$(median <<<"${calls[$v]}")" "${cpu[$v]}" "${errors[$v]}"
  done
  unset rate p99 usec calls errors cpu
done
