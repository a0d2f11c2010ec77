#!/usr/bin/env bash
# Draws the pictures of docs/algorithms.md: every algorithm over each example trace of
# examples/traces/ (`sluice simulate --compare`, 5 per 10 s), into docs/img/<trace>.svg.
# Usage: scripts/algorithm-pictures.sh [--check]
#   --check    draw into a temporary directory and fail if docs/img differs (pictures out of date)
#   SLUICE=... the sluice binary to use; by default build/release/sluice, configured and built
#              first when needed (cmake, ninja)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

sluice=${SLUICE:-}
if [ -z "$sluice" ]; then
  build="$root/build/release"
  if [ ! -f "$build/build.ninja" ]; then
    launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
  fi
  cmake --build "$build" --target sluice_cli -- -j2 >/dev/null
  sluice="$build/sluice"
fi

out="$root/docs/img"
if $check; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# name|headline
pictures=(
  "burst|A burst: 20 requests at once, then a few spread out"
  "boundary|A boundary burst: 5 requests just before a window boundary, 5 just after"
  "overload|Steady overload: a request every 500 ms, four times the limit"
  "trickle|A slow trickle: about one request every 2.5 s, under the limit"
)
for picture in "${pictures[@]}"; do
  name=${picture%%|*}
  "$sluice" simulate --compare --limit 5 --period 10s --trace "$root/examples/traces/$name.txt" \
    --title "${picture#*|}" --svg "$out/$name.svg"
done

if $check; then
  for picture in "${pictures[@]}"; do
    name=${picture%%|*}
    if ! cmp -s "$out/$name.svg" "$root/docs/img/$name.svg"; then
      echo "docs/img/$name.svg is out of date: run scripts/algorithm-pictures.sh" >&2
      exit 1
    fi
  done
  echo "docs/img is up to date"
else
  echo "wrote ${pictures[*]%%|*} to docs/img"
fi
