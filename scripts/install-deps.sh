#!/usr/bin/env bash
# Installs the Debian 12 packages sluice builds, tests and benchmarks with. Idempotent: only
# missing packages are installed, and apt-get update runs only when something is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev clang-format pkg-config
  libboost1.81-dev libhiredis-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libfmt-dev libspdlog-dev libcpp-httplib-dev libssl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc grpc-proto
  python3-grpcio python3-grpc-tools python3-protobuf
  libgtest-dev libgmock-dev libbenchmark-dev libexpat1-dev libxml2-utils libfaketime
  redis-server redis-tools curl wrk
  # The dashboard's tests: its scripts under node, its page in headless Chromium (chromedriver).
  nodejs chromium chromium-driver
  # Forward auth through real reverse proxies (tests/http/forward_auth_proxy_test.cc).
  nginx caddy
  # The Debian package and its tests (tests/package/): CPack's shlibdeps, lintian, the unit's
  # checks (systemd-analyze, strace), the man page's.
  dpkg-dev file lintian systemd strace man-db bsdextrautils procps
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
