#!/usr/bin/env bash
# The two Quick start commands of the README:
#   scripts/dev.sh run    install what is missing, build, run the main job: `sluice serve` on the
#                         in-memory store with examples/sluice.yaml, on 127.0.0.1:8080
#   scripts/dev.sh test   install what is missing, build, run every test: a release build with
#                         -Werror, an ASan+UBSan build, a TSan build of the concurrent code, and
#                         the libFuzzer targets for a bounded time
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
configure() {  # DIR [cmake args...]
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DSLUICE_WERROR=ON "$@" >/dev/null
}

run() {
  configure build/release -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF
  ninja -C build/release -j "$jobs" sluice_cli
  echo "== sluice serve on 127.0.0.1:8080 (in-memory store, examples/sluice.yaml); Ctrl-C stops it"
  echo "   try: curl -si localhost:8080/v1/check -d '{\"rule\":\"api\",\"key\":\"user:42\"}'"
  exec ./build/release/sluice serve --config examples/sluice.yaml
}

test_all() {
  echo "== release build, every test"
  configure build/release -DCMAKE_BUILD_TYPE=Release
  ninja -C build/release -j "$jobs"
  ctest --test-dir build/release --output-on-failure -j "$jobs"

  echo "== ASan + UBSan build, every test"
  configure build/asan -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address,undefined \
    -DSLUICE_BUILD_BENCH=OFF
  ninja -C build/asan -j "$jobs"
  ctest --test-dir build/asan --output-on-failure -j "$jobs" -LE 'install|fault'

  # clang: GCC's TSan cannot model the atomic fences Boost.Asio uses.
  echo "== TSan build (clang), the concurrent code"
  CC=clang CXX=clang++ configure build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSLUICE_SANITIZE=thread -DSLUICE_BUILD_BENCH=OFF
  ninja -C build/tsan -j "$jobs"
  TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp" \
    ctest --test-dir build/tsan --output-on-failure -j "$jobs" -L 'concurrency|redis|http' -LE fault

  echo "== libFuzzer: the HTTP API and the config parser, 20 s each"
  bash scripts/fuzz.sh 20
}

bash scripts/install-deps.sh
case "${1:-}" in
  run) run ;;
  test) test_all ;;
  *)
    echo "usage: scripts/dev.sh run|test" >&2
    exit 2
    ;;
esac
