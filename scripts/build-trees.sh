# shellcheck shell=bash
# The build trees of scripts/dev.sh and scripts/fuzz.sh, configured one way wherever they are
# built, so that neither script reconfigures the other's tree. Sourced, not run. Every configure
# states the compiler and each of the project's options, so nothing is left over from an earlier
# configure of the tree.
#   configure_release   build/release: the system's compiler (GCC), -O3, the benchmarks
#   configure_asan      build/asan: clang, ASan+UBSan, and the libFuzzer targets, whose coverage
#                       the library code carries
#   configure_tsan      build/tsan: clang (GCC's TSan cannot model the atomic fences Boost.Asio
#                       uses), TSan

configure() {  # DIR BUILD_TYPE COMPILER SANITIZERS BENCH(ON|OFF) FUZZ(ON|OFF)
  # Told another compiler, CMake empties the cache and forgets the options given with it: a tree
  # configured with another compiler starts afresh instead.
  # The cache holds the compiler as it was given (clang++) or as CMake found it (/usr/bin/clang++).
  local cached=""
  [[ ! -f $1/CMakeCache.txt ]] ||
    cached=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$1/CMakeCache.txt")
  if [[ -n $cached && $(command -v "$cached") != "$(command -v "$3")" ]]; then
    rm -rf "$1/CMakeCache.txt" "$1/CMakeFiles"
  fi
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE="$2" -DCMAKE_CXX_COMPILER="$3" \
    -DSLUICE_SANITIZE="$4" -DSLUICE_BUILD_BENCH="$5" -DSLUICE_BUILD_TESTS=ON -DSLUICE_FUZZ="$6" \
    -DSLUICE_WERROR=ON >/dev/null
}
configure_release() { configure build/release Release c++ "" ON OFF; }
configure_asan() { configure build/asan Debug clang++ address,undefined OFF ON; }
configure_tsan() { configure build/tsan RelWithDebInfo clang++ thread OFF OFF; }
