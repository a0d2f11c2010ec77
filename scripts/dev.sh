#!/usr/bin/env bash
# The two Quick start commands of the README:
#   scripts/dev.sh run    install what is missing, build, run the main job: `sluice serve` on the
#                         in-memory store with examples/sluice.yaml, on 127.0.0.1:8080 (further
#                         arguments go to `sluice serve`, e.g. --listen 127.0.0.1:9090)
#   scripts/dev.sh test   install what is missing, build, run every test: a release build with
#                         -Werror, an ASan+UBSan build, a TSan build of the concurrent code, and
#                         the libFuzzer targets for a bounded time
# Either may run first, and each any number of times, on one clone: `run` builds sluice in the
# release tree that `test` uses, configured the same way (scripts/build-trees.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
source scripts/build-trees.sh

run() {
  configure_release
  ninja -C build/release -j "$jobs" sluice_cli
  echo "== sluice serve (in-memory store, examples/sluice.yaml: 127.0.0.1:8080 unless --listen)," \
    "Ctrl-C stops it"
  echo "   try: curl -si localhost:8080/v1/check -d '{\"rule\":\"api\",\"key\":\"user:42\"}'"
  exec ./build/release/sluice serve --config examples/sluice.yaml "$@"
}

passed=0
failed=0
# ctest, with its counts added to the run's totals.
run_ctest() {
  local log
  log=$(mktemp)
  set +e
  ctest "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  set -e
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)
  rm -f "$log"
  if [[ $line =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1]))
    passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  if ((status != 0)); then
    echo "$passed passed, $failed failed"
    exit "$status"
  fi
}

test_all() {
  echo "== release build, every test"
  configure_release
  ninja -C build/release -j "$jobs"
  run_ctest --test-dir build/release --output-on-failure -j "$jobs"

  echo "== ASan + UBSan build (clang), every test; and the libFuzzer targets"
  configure_asan
  ninja -C build/asan -j "$jobs"
  run_ctest --test-dir build/asan --output-on-failure -j "$jobs" -LE 'install|fault|rss|throughput'

  echo "== TSan build (clang), the concurrent code"
  configure_tsan
  local labels=(concurrency redis http rls)
  # Only the programs of the labels it runs (tests_<label>, cmake/sluice_test.cmake).
  ninja -C build/tsan -j "$jobs" "${labels[@]/#/tests_}"
  export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp"
  run_ctest --test-dir build/tsan --output-on-failure -j "$jobs" \
    -L "$(IFS='|' && echo "${labels[*]}")" -LE 'fault|throughput'

  echo "== libFuzzer: the HTTP API and the config parser, 20 s each"
  bash scripts/fuzz.sh 20

  echo "== every stage passed"
  echo "$passed passed, $failed failed"
}

bash scripts/install-deps.sh
case "${1:-}" in
  run)
    shift
    run "$@"
    ;;
  test) test_all ;;
  *)
    echo "usage: scripts/dev.sh run [sluice serve options] | scripts/dev.sh test" >&2
    exit 2
    ;;
esac
