#!/usr/bin/env bash
# The rate limit service (gRPC, `sluice bench --rls`) and POST /v1/check (HTTP, wrk) against one
# `sluice serve` (bench/rls/serve.yaml, memory store unless STORE is given), interleaved over
# ROUNDS rounds of DURATION each, client and server on this machine (docs/benchmarks.md).
# Usage: SLUICE=build/release/sluice [STORE=redis://127.0.0.1:PORT] scripts/bench-rls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-build/release/sluice}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONCURRENCY=${CONCURRENCY:-64}
store_flag=()
[[ -n "${STORE:-}" ]] && store_flag=(--store "$STORE")

"$SLUICE" serve --config bench/rls/serve.yaml --io-threads 1 "${store_flag[@]}" \
  >/tmp/sluice-bench-rls.log 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf http://127.0.0.1:18080/healthz >/dev/null && break
  sleep 0.1
done

for round in $(seq "$ROUNDS"); do
  for descriptors in 1 4; do
    echo "round $round: rls, $descriptors descriptor(s) per request"
    "$SLUICE" bench --rls 127.0.0.1:18081 --rls-descriptors "$descriptors" --keys 100000 \
      --key-prefix user: --concurrency "$CONCURRENCY" --duration "$DURATION"
  done
  echo "round $round: POST /v1/check (wrk)"
  wrk -t1 -c"$CONCURRENCY" -d"$DURATION" --latency -s bench/wrk/check.lua \
    http://127.0.0.1:18080/v1/check | grep -E "Requests/sec|  50%|  99%"
done
