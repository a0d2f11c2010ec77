#!/usr/bin/env bash
# Installs the Debian 12 packages sluice builds, tests and benchmarks with. Idempotent: only
# missing packages are installed, and apt-get update runs only when something is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev clang-format pkg-config
  libboost1.81-dev libhiredis-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libfmt-dev libspdlog-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev libfaketime
  redis-server redis-tools curl wrk
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
