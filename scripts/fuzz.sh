#!/usr/bin/env bash
# Fuzzes the HTTP API function, the reader of a client's JSON and the config parser with
# libFuzzer for a bounded time each:
#   scripts/fuzz.sh [SECONDS_PER_TARGET]    (default 20)
# Builds them in the ASan+UBSan tree of the tests (build/asan, scripts/build-trees.sh), with
# libFuzzer's coverage on the library code. The seeds in fuzz/corpus/ stay untouched; new inputs
# go to build/asan/corpus/. Exits non-zero on a crash, leaving the crashing input in the current
# directory (crash-*).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build-trees.sh

seconds=${1:-20}
build=build/asan
configure_asan
ninja -C "$build" -j "$(nproc)" api_fuzz json_fuzz config_fuzz

# Inputs as long as the API's largest body (64 KiB) and a little more, plus the route byte, so
# that bodies near and over the cap are explored; libFuzzer's default stops at 4 KiB.
declare -A max_len=([api]=66000 [json]=4096 [config]=4096)
for target in api json config; do
  work=$build/corpus/$target
  mkdir -p "$work"
  echo "== ${target}_fuzz for ${seconds}s"
  "$build/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len="${max_len[$target]}" -print_final_stats=1 "$work" "fuzz/corpus/$target"
done
