#!/usr/bin/env bash
# Leases for a hot key: one key checked 100 000 times a second by 3 processes, with a
# limit of 50 000 a second, without leases and with them, on one fresh redis-server (loopback, no
# persistence). Per algorithm, round and variant, after FLUSHALL and CONFIG RESETSTAT: 3 sluice
# bench processes start together on the key (--keys 1), each open loop at --rate 33334 with
# --limit 50000 --period 1s (default burst); "lease" adds --lease-units LEASE_UNITS
# --lease-lifetime LEASE_LIFETIME. Printed per run and as medians of the rounds:
#   checks      decisions of the 3 processes (and those that started late, past --concurrency);
#   admitted    their admissions, summed;
#   allowed     the most the limit admits over the run: burst + rate × span for gcra and
#               token_bucket, count × the windows the run touched for fixed_window; the span runs
#               from the first process's start to the last one's end (their own clocks, bounded by
#               the script's wall time around them);
#   over        max(0, admitted − allowed): must be 0;
#   calls       Redis script calls (evalsha, evalsha_ro, eval in INFO commandstats), their
#               usec_per_call, and calls per check;
#   ratio       lease calls per check over no-lease calls per check (the target: ≤ 0.1);
#   leases      taken, units taken / used / returned / lapsed, refusals (summed).
#
# Usage: [ROUNDS=3] [DURATION=10s] [ALGORITHMS="gcra fixed_window token_bucket"]
#        [LEASE_UNITS=500] [LEASE_LIFETIME=100ms] [SLUICE=build/release/sluice]
#        scripts/bench-lease.sh
set -euo pipefail
rounds=${ROUNDS:-3} duration=${DURATION:-10s} sluice=${SLUICE:-build/release/sluice}
units=${LEASE_UNITS:-500} lifetime=${LEASE_LIFETIME:-100ms}
read -r -a algorithms <<<"${ALGORITHMS:-gcra fixed_window token_bucket}"
processes=3 rate=33334 limit=50000
# shellcheck source=scripts/redis-server.sh
source "$(dirname "$0")/redis-server.sh"

# One run: the 3 processes' reports and the script calls, as one JSON line on stdout.
run() { # algorithm variant round
  local lease=() pids=() i
  [ "$2" = lease ] && lease=(--lease-units "$units" --lease-lifetime "$lifetime")
  cli flushall >/dev/null && cli config resetstat >/dev/null
  local began ended
  began=$(date +%s.%N)
  for i in $(seq "$processes"); do
    "$sluice" bench --store "redis://127.0.0.1:$port" --algorithm "$1" --keys 1 \
      --key-prefix lease-bench: --rate "$rate" --limit "$limit" --period 1s \
      --duration "$duration" "${lease[@]}" --json >"$dir/out.$i" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  ended=$(date +%s.%N)
  cli info commandstats | tr -d '\r' >"$dir/commandstats"
  python3 - "$1" "$2" "$3" "$began" "$ended" "$limit" "$dir/commandstats" "$dir"/out.* <<'EOF'
import json, math, re, sys
algorithm, variant, round_, began, ended, limit, stats = sys.argv[1:8]
limit = int(limit)  # per second
outs = [json.load(open(path)) for path in sys.argv[8:]]
calls = usec = 0
for line in open(stats):
    m = re.match(r'cmdstat_(evalsha|evalsha_ro|eval|eval_ro):calls=(\d+),usec=(\d+)', line)
    if m:
        calls += int(m.group(2))
        usec += int(m.group(3))
start = max(min(o['start_unix_s'] for o in outs), float(began))
end = min(max(o['end_unix_s'] for o in outs), float(ended))
if algorithm == 'fixed_window':  # windows of 1 s from the epoch, as Redis TIME counts them
    allowed = limit * (math.floor(end) - math.floor(start) + 1)
else:
    allowed = outs[0]['capacity'] + math.floor(limit * (end - start))
checks = sum(o['decisions'] for o in outs)
admitted = sum(o['allowed'] for o in outs)
lease = {k: sum(o.get('lease', {}).get(k, 0) for o in outs)
         for k in ('taken', 'units_taken', 'units_used', 'units_returned', 'units_lapsed',
                   'refusals')}
print(json.dumps({
    'algorithm': algorithm, 'variant': variant, 'round': int(round_), 'checks': checks,
    'late': sum(o['late'] for o in outs), 'errors': sum(o['errors'] for o in outs),
    'admitted': admitted, 'allowed': allowed, 'over': max(0, admitted - allowed),
    'span_s': end - start, 'calls': calls, 'usec_per_call': usec / calls if calls else 0,
    'calls_per_check': calls / checks if checks else 0, 'lease': lease,
    'first_error': next((o['first_error'] for o in outs if 'first_error' in o), None)}))
EOF
}

echo "redis-server $(redis-server --version | grep -oE 'v=[0-9.]+'), $(nproc) cores," \
  "load at start: $(cut -d' ' -f1-3 /proc/loadavg); $processes processes x $rate/s on one key," \
  "limit $limit/s, $duration per run, leases of $units for at most $lifetime"
for algorithm in "${algorithms[@]}"; do
  for round in $(seq "$rounds"); do
    for variant in plain lease; do
      run "$algorithm" "$variant" "$round" | tee -a "$dir/runs" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
l = r["lease"]
print("%s %-5s round %d: checks %d (late %d, errors %d), admitted %d, allowed %d, over %d; "
      "Redis calls %d (%.4f per check, %.1f us each)%s" % (
      r["algorithm"], r["variant"], r["round"], r["checks"], r["late"], r["errors"],
      r["admitted"], r["allowed"], r["over"], r["calls"], r["calls_per_check"],
      r["usec_per_call"],
      "; leases %d, units taken %d used %d returned %d lapsed %d, refusals %d" % (
          l["taken"], l["units_taken"], l["units_used"], l["units_returned"],
          l["units_lapsed"], l["refusals"]) if r["variant"] == "lease" else ""))
if r["first_error"]:
    print("  the first error: %s" % r["first_error"])
if r["over"] > 0:
    print("OVER-ADMISSION: %s %s round %d admitted %d, the limit allows %d over %.3f s" % (
          r["algorithm"], r["variant"], r["round"], r["admitted"], r["allowed"], r["span_s"]))'
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir/runs" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
def median(values):
    return statistics.median_low(values)
for algorithm in dict.fromkeys(r['algorithm'] for r in runs):
    of = lambda v: [r for r in runs if r['algorithm'] == algorithm and r['variant'] == v]
    plain, lease = of('plain'), of('lease')
    for name, rs in (('plain', plain), ('lease', lease)):
        m = lambda k: median([r[k] for r in rs])
        line = ('%s %-5s median of %d: checks %d (late %d), admitted %d, allowed %d, '
                'over %d (max %d); Redis calls %d, %.4f per check, %.1f us each') % (
            algorithm, name, len(rs), m('checks'), m('late'), m('admitted'), m('allowed'),
            m('over'), max(r['over'] for r in rs), m('calls'), m('calls_per_check'),
            m('usec_per_call'))
        if name == 'lease':
            l = lambda k: median([r['lease'][k] for r in rs])
            line += '; leases %d, units taken %d used %d returned %d lapsed %d, refusals %d' % (
                l('taken'), l('units_taken'), l('units_used'), l('units_returned'),
                l('units_lapsed'), l('refusals'))
        print(line)
    ratios = [b['calls_per_check'] / a['calls_per_check'] for a, b in zip(plain, lease)
              if a['calls_per_check'] > 0]
    print('%s calls per check lease/plain: %s, median %.4f (target <= 0.1)' % (
        algorithm, ' '.join('%.4f' % r for r in ratios), median(ratios) if ratios else float('nan')))
EOF
