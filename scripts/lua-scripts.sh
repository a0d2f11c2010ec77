#!/usr/bin/env bash
# Writes the Redis store's scripts exactly as sluice embeds them (cmake/embed_lua.cmake over a
# tree's src/redis/lua) as files: OUT/<algorithm>.lua, the check script of each algorithm,
# OUT/<algorithm>_many.lua, the coalesced one of each, OUT/check_all.lua and
# OUT/give_back_<meter>.lua, each meter's give-back.
# Usage: scripts/lua-scripts.sh TREE OUT   (TREE: a checkout, e.g. .)
set -euo pipefail
tree=$1 out=$2
mkdir -p "$out"
cmake -DLUA_DIR="$tree/src/redis/lua" -DOUTPUT="$out/scripts.cc" -P "$tree/cmake/embed_lua.cmake"
# The raw string literals of the generated C++, in order: kCheckSources (the Algorithm enum's
# order), kCheckManySources (likewise; absent in revisions before coalescing), kCheckAllSource,
# then kGiveBackSources (the meters; absent in revisions before leases).
awk -v out="$out" '{
  line = $0
  while (1) {
    if (!inside) {
      i = index(line, "R\"sluice_lua(")
      if (i == 0) break
      inside = 1; file = out "/" (++n) ".lua"; line = substr(line, i + 13)
    }
    j = index(line, ")sluice_lua\"")
    if (!j) { print line > file; break }
    printf "%s", substr(line, 1, j - 1) > file; close(file); inside = 0
    line = substr(line, j + 12)
  }
}' "$out/scripts.cc"
rm "$out/scripts.cc"
algorithms="fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra"
names="$algorithms"
if [ -f "$out/13.lua" ]; then
  for a in $algorithms; do names+=" ${a}_many"; done
fi
names+=" check_all"
if [ -f "$out/$(($(wc -w <<<"$names") + 1)).lua" ]; then
  for meter in token_bucket leaky_bucket gcra; do names+=" give_back_$meter"; done
fi
i=1
for name in $names; do
  mv "$out/$i.lua" "$out/$name.lua"
  i=$((i + 1))
done
