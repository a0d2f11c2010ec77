#!/usr/bin/env bash
# Redis CPU per decision: each algorithm's check script, exactly as sluice embeds it, against a
# minimal hand-written script of the same algorithm with the same behaviour (bench/lua/*.lua),
# side by side on one fresh redis-server (loopback, no persistence).
#
# First a differential check: one random trace (explicit clocks going back and forth, costs,
# peeks, parameter changes, bookings, keys holding other states) through both scripts, on
# separate keys; their replies and what they leave in Redis (type, value, expiry time) must
# be the same, or the script stops. Then, per algorithm and round, each script answers the same
# REQUESTS EVALSHAs (Redis TIME, keys drawn at random from 100 000), sent with redis-cli --pipe
# after FLUSHALL and CONFIG RESETSTAT; Redis's own usec_per_call of evalsha (INFO commandstats) is
# the figure, with the CPU time of Redis's main thread per call beside it (reading and answering
# the commands included; unlike usec_per_call, untouched by the thread losing its core on a busy
# machine). The order of the scripts alternates between rounds; medians are printed, with the
# median of the rounds' ratios to the reference.
#
# SCENARIO=mixed (default): 2 per hour (a window of 1 h, or a bucket of 2 refilled every 30 min),
#   so a key's first two requests of a run are admitted and the rest denied (the share is
#   printed); sliding_log's logs hold at most 2 entries.
# SCENARIO=admit: 1 000 000 per second, every request admitted.
# BASELINE=<git revision>: also measure the scripts of that revision ("before").
#
# Usage: [ROUNDS=5] [REQUESTS=300000] [SCENARIO=mixed|admit] [BASELINE=rev] [CHECK_STEPS=1500]
#        scripts/bench-scripts.sh [ALGORITHM...]   (default: all six)
set -euo pipefail
cd "$(dirname "$0")/.."
all_algorithms=(fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra)
algorithms=("$@")
((${#algorithms[@]})) || algorithms=("${all_algorithms[@]}")
rounds=${ROUNDS:-5}
requests=${REQUESTS:-300000}
scenario=${SCENARIO:-mixed}
check_steps=${CHECK_STEPS:-1500}
keys=100000

# shellcheck source=scripts/redis-server.sh
source scripts/redis-server.sh

variants=()
if [ -n "${BASELINE:-}" ]; then
  mkdir -p "$dir/before-tree"
  git archive "$BASELINE" cmake src/redis/lua | tar -x -C "$dir/before-tree"
  # The script of a revision before this one is built by that revision's embed_lua.cmake.
  cp scripts/lua-scripts.sh "$dir/"
  "$dir/lua-scripts.sh" "$dir/before-tree" "$dir/before"
  variants+=(before)
fi
scripts/lua-scripts.sh . "$dir/ours"
mkdir -p "$dir/reference" && cp bench/lua/*.lua "$dir/reference/"
variants+=(ours reference)

# The parameters of a scenario: window algorithms take (count, period µs), the buckets
# (capacity, emission interval µs); `burst`: how many requests of a key a run admits.
parameters() { # algorithm -> "a b burst"
  case "$scenario:$1" in
    mixed:fixed_window | mixed:sliding_window | mixed:sliding_log) echo 2 3600000000 2 ;;
    mixed:*) echo 2 1800000000 2 ;;
    admit:fixed_window | admit:sliding_window | admit:sliding_log) echo 1000000 1000000 0 ;;
    admit:*) echo 1000000 1 0 ;;
    *) echo "unknown SCENARIO=$scenario" >&2 && exit 2 ;;
  esac
}

# A random trace in redis-cli's line format through two scripts at once: each step runs, in one
# MULTI/EXEC, script A on keys "A:…", script B on keys "B:…", then compares what they left in
# Redis: type, value and expiry time, B's no earlier than A's and no later than the time the
# step took (B writes a little later), after which B's is set to A's.
trace() { # algorithm sha_a sha_b
  awk -v algorithm="$1" -v sha_a="$2" -v sha_b="$3" -v stamp="$stamp" -v compare="$compare" \
    -v steps="$check_steps" 'BEGIN {
    srand(7)
    window = algorithm ~ /window|log/
    if (window) { a[0] = 3; b[0] = 10000000; a[1] = 5; b[1] = 10000000; a[2] = 3; b[2] = 7000000 }
    else { a[0] = 3; b[0] = 2000000; a[1] = 5; b[1] = 2000000; a[2] = 3; b[2] = 3000000 }
    cost[0] = 0; cost[1] = 1; cost[2] = 1; cost[3] = 1; cost[4] = 2; cost[5] = 3
    now = 1700000000000000
    for (step = 1; step <= steps; step++) {
      k = "{k" int(rand() * 3) "}"
      r = rand()
      if (r < 0.3) now += int(rand() * 500000)
      else if (r < 0.4) now += 1
      else if (r < 0.55) now += int(rand() * 2 * b[0])
      else if (r < 0.65) now -= int(rand() * 5000000)
      else if (r < 0.7) now += 30000000
      t = sprintf("%.0f", now)
      p = rand() < 0.8 ? 0 : int(rand() * 3)
      delay = (!window && rand() < 0.3) ? int(rand() * 3 * b[p]) : 0
      args = t " 7 " cost[int(rand() * 6)] " " a[p] " " b[p] " " delay
      r = rand()
      for (side = 0; side < 2; side++) {
        key = (side ? "B:" : "A:") k
        if (r < 0.01) print "SET " key " x1"
        else if (r < 0.02) print "SET " key " 1700000000000000"
        else if (r < 0.03) print "ZADD " key " " t " 1"
        else if (r < 0.04) print "DEL " key
        else if (r < 0.05) print "DEL " key ":n"
      }
      print "MULTI"
      print "EVALSHA " stamp " 0"
      print "ECHO step-" step
      keys = algorithm == "sliding_log" ? "2 A:" k " A:" k ":n" : "1 A:" k
      print "EVALSHA " sha_a " " keys " " args
      print "ECHO ---"
      gsub(/A:/, "B:", keys)
      print "EVALSHA " sha_b " " keys " " args
      print "ECHO ==="
      print "EVALSHA " compare " 4 A:" k " A:" k ":n B:" k " B:" k ":n"
      print "EXEC"
    }
  }'
}
# Redis TIME in ms, before a step's scripts; the comparison of what they left.
stamp=$(cli script load "local t = redis.call('TIME')
redis.call('SET', 'stamp', t[1] * 1000 + math.floor(t[2] / 1000))")
compare=$(cli script load "local function seen(k)
  local kind = redis.call('TYPE', k).ok
  local v = ''
  if kind == 'string' then
    v = redis.call('GET', k)
  elseif kind == 'zset' then
    v = table.concat(redis.call('ZRANGE', k, 0, -1, 'WITHSCORES'), ',')
  end
  v = string.gsub(v, '[^%w%p]', function(c) return string.format('<%02x>', string.byte(c)) end)
  return kind .. ' ' .. v, redis.call('PEXPIRETIME', k)
end
local t = redis.call('TIME')
local took = t[1] * 1000 + math.floor(t[2] / 1000) - tonumber(redis.call('GET', 'stamp'))
for i = 1, 2 do
  local a, a_expiry = seen(KEYS[i])
  local b, b_expiry = seen(KEYS[i + 2])
  local later = b_expiry - a_expiry
  if a ~= b or (a_expiry < 0 or b_expiry < 0) and later ~= 0 or later < 0 or later > took then
    return 'differ: ' .. KEYS[i] .. ' ' .. a .. ' expiry ' .. a_expiry .. ', ' .. KEYS[i + 2] ..
      ' ' .. b .. ' expiry ' .. b_expiry .. ' (the step took ' .. took .. ' ms)'
  end
  if a_expiry > 0 then
    redis.call('PEXPIREAT', KEYS[i + 2], a_expiry)
  end
end
return 'same'")

# Each step's two replies and the comparison of the keys: the first difference, if any.
same_trace() {
  awk '/^step-/ { step = $0; part = 1; a = b = ""; next }
    /^---$/ { part = 2; next }
    /^===$/ { part = 3; next }
    part == 1 { a = a $0 " "; next }
    part == 2 { b = b $0 " "; next }
    part == 3 {
      if (a != b) { printf "%s: replies %s and %s\n", step, a, b; exit 1 }
      if ($0 != "same") { printf "%s: %s\n", step, $0; exit 1 }
      part = 0; steps++
    }
    END { if (steps == 0) exit 1 }'
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", x / y}'; }
# Seconds of CPU Redis's main thread has used, user and system.
main_thread_cpu() {
  cli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys)_main_thread:/ {s += $2} END {print s}'
}
echo "redis-server $(redis-server --version | grep -oE 'v=[0-9.]+'), scenario $scenario," \
  "$requests requests per run, $rounds rounds; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for algorithm in "${algorithms[@]}"; do
  declare -A sha=()
  for v in "${variants[@]}"; do
    sha[$v]=$(cli -x script load <"$dir/$v/$algorithm.lua" | tr -d '\r')
  done

  for v in "${variants[@]}"; do
    [ "$v" = reference ] && continue
    if ! trace "$algorithm" "${sha[$v]}" "${sha[reference]}" | cli | same_trace >&2; then
      echo "$algorithm: $v (A) and the reference (B) differ; trace: CHECK_STEPS=$check_steps" >&2
      exit 1
    fi
  done

  read -r a b burst < <(parameters "$algorithm")
  key_count=1
  [ "$algorithm" = sliding_log ] && key_count=2
  for v in "${variants[@]}"; do
    awk -v n="$requests" -v keys="$keys" -v sha="${sha[$v]}" -v key_count="$key_count" \
      -v a="$a" -v b="$b" -v burst="$burst" -v share="$dir/share" '
      function bulk(s) { return "$" length(s) "\r\n" s "\r\n" }
      BEGIN {
        srand(1)
        head = "*" (9 + key_count) "\r\n" bulk("EVALSHA") bulk(sha) bulk(key_count)
        tail = bulk("") bulk(1) bulk(1) bulk(a) bulk(b) bulk(0)
        for (i = 0; i < n; i++) {
          k = int(rand() * keys)
          seen[k]++
          key = "sluice:bench:{" k "}"
          printf "%s%s%s%s", head, bulk(key), key_count == 2 ? bulk(key ":n") : "", tail
        }
        admitted = 0
        for (k in seen) admitted += burst && seen[k] > burst ? burst : seen[k]
        printf "%.0f", 100 * admitted / n > share
      }' >"$dir/load.$v"
  done
  # Per script: usec_per_call and main-thread CPU µs per call of every round; per round, the
  # ratios to the reference's usec_per_call (the runs of a round are next to each other in time).
  declare -A usec=() cpu=() ratios=()
  order=("${variants[@]}")
  for round in $(seq "$rounds"); do
    line="$algorithm round $round:"
    declare -A this=()
    for v in "${order[@]}"; do
      cli flushall >/dev/null
      cli config resetstat >/dev/null
      cpu_before=$(main_thread_cpu)
      cli --pipe <"$dir/load.$v" >/dev/null
      cpu_after=$(main_thread_cpu)
      stats=$(cli info commandstats | grep '^cmdstat_evalsha:' | tr -d '\r')
      calls=$(grep -oE '[^_]calls=[0-9]+' <<<"$stats" | cut -d= -f2)
      failed=$(grep -oE 'failed_calls=[0-9]+' <<<"$stats" | cut -d= -f2)
      if [ "$calls" != "$requests" ] || [ "${failed:-0}" != 0 ]; then
        echo "$algorithm $v: $stats" >&2
        exit 1
      fi
      this[$v]=$(grep -oE 'usec_per_call=[0-9.]+' <<<"$stats" | cut -d= -f2)
      usec[$v]+="${this[$v]} "
      c=$(awk -v a="$cpu_before" -v b="$cpu_after" -v n="$requests" \
        'BEGIN {printf "%.2f", (b - a) * 1e6 / n}')
      cpu[$v]+="$c "
      line+=" $v ${this[$v]} (cpu $c)"
    done
    for v in "${variants[@]}"; do
      [ "$v" = reference ] || ratios[$v]+="$(ratio "${this[$v]}" "${this[reference]}") "
    done
    echo "$line"
    unset this
    # The next round runs the scripts in the reverse order.
    for ((i = 0, j = ${#order[@]} - 1; i < j; i++, j--)); do
      t=${order[i]} order[i]=${order[j]} order[j]=$t
    done
  done
  summary="$algorithm, medians of $rounds rounds: µs per call"
  for v in "${variants[@]}"; do
    summary+=" $v $(median <<<"${usec[$v]}") (cpu $(median <<<"${cpu[$v]}"))"
  done
  summary+="; per round ours/reference $(median <<<"${ratios[ours]}")"
  [ -n "${BASELINE:-}" ] && summary+=", before/reference $(median <<<"${ratios[before]}")"
  echo "$summary (admitted: $(cat "$dir/share")%)"
  unset sha usec cpu ratios
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
