#!/usr/bin/env bash
# The `sluice` command as a service manager runs it, and the Debian package as a user installs it.
# One case per ctest test (tests/package/CMakeLists.txt):
#   version BIN                 --version prints the version and the commit built
#   check_config BIN CONFIG     --check-config accepts CONFIG, rejects bad files, opens nothing
#   build                       cpack the build tree, unpack the .deb into $PACKAGE_DIR/root
#   contents, lintian, unit, sandbox, serve, pkg_config, find_package: the built package
# Environment: SOURCE_DIR, BUILD_DIR, VERSION; for the package also PACKAGE_DIR, LIBDIR, CPACK,
# CXX.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

scratch=$(mktemp -d)
background_pids=() # killed on exit
cleanup() {
  for pid in "${background_pids[@]}"; do
    { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT

# Starts `sluice serve ARGS...` (maybe under strace) in the background, its stderr in LOG, and
# waits, at most 10 s, for it to say where it listens; sets serve_pid (to wait for), signal_pid
# (sluice itself: strace does not pass signals on) and port.
start_serve() {
  local log=$1
  shift
  : >"$log" # before the background job's redirection, which may come after the first look
  "$@" 2>>"$log" &
  serve_pid=$!
  background_pids+=("$serve_pid")
  for _ in $(seq 100); do
    port=$(sed -n 's/.* serving on [^ ]*:\([0-9]*\) with .*/\1/p' "$log")
    if [ -n "$port" ]; then
      signal_pid=$(pgrep -P "$serve_pid" || echo "$serve_pid")
      background_pids+=("$signal_pid")
      return 0
    fi
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  fail "sluice serve did not start: $*"
}

# Sends SIGTERM to the last started service and expects a graceful stop (exit 0) within 10 s.
stop_serve() {
  kill -TERM "$signal_pid"
  for _ in $(seq 100); do
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  local status=0
  wait "$serve_pid" || status=$?
  [ "$status" -eq 0 ] || fail "sluice serve exited $status after SIGTERM"
}

# Waits at most 10 s for LOG to contain PATTERN.
wait_for_log() {
  local log=$1 pattern=$2
  for _ in $(seq 100); do
    grep -q "$pattern" "$log" && return 0
    sleep 0.1
  done
  cat "$log" >&2
  fail "no '$pattern' in the log"
}

check_version() {
  local bin=$1 out
  out=$("$bin" --version) || fail "--version exited $?"
  [[ $out =~ ^sluice\ ([^ ]+)\ \(git\ ([^ ]+)\)$ ]] || fail "--version printed '$out'"
  [ "${BASH_REMATCH[1]}" = "$VERSION" ] || fail "--version says ${BASH_REMATCH[1]}, not $VERSION"
  local commit=${BASH_REMATCH[2]%-dirty}
  if [ "$(git -C "$SOURCE_DIR" rev-parse --show-toplevel 2>/dev/null)" = "$(realpath "$SOURCE_DIR")" ]; then
    # describe: "f3ca656" or "v0.1.0-3-gf3ca656"; either names HEAD.
    [ "$(git -C "$SOURCE_DIR" rev-parse --verify -q "${commit##*-g}^{commit}")" = \
      "$(git -C "$SOURCE_DIR" rev-parse HEAD)" ] || fail "--version names $commit, HEAD is $(
      git -C "$SOURCE_DIR" rev-parse --short HEAD)"
  else
    [ "$commit" = unknown ] || fail "not a git checkout, yet --version names commit $commit"
  fi
  echo "$out"
}

check_config() {
  local bin=$1 config=$2 out status
  out=$("$bin" serve --check-config "$config") || fail "--check-config $config exited $?"
  [[ $out == "sluice serve: $config: OK, "* ]] || fail "--check-config printed '$out'"
  [ "$(wc -l <<<"$out")" -eq 1 ] || fail "--check-config printed more than one line"
  echo "$out"

  # A bad field: exit 2, the file, the line and the field named.
  sed 's/^    period: 1m$/    period: 1x/' "$config" >"$scratch/bad.yaml"
  local line
  line=$(grep -n '^    period: 1x$' "$scratch/bad.yaml" | cut -d: -f1)
  [ -n "$line" ] || fail "no rule of $config has 'period: 1m' to break"
  status=0
  out=$("$bin" serve --check-config "$scratch/bad.yaml" 2>&1) || status=$?
  [ "$status" -eq 2 ] || fail "--check-config of a bad file exited $status: $out"
  [[ $out == "sluice serve: $scratch/bad.yaml:$line: rules[0].period: bad duration '1x'"* ]] ||
    fail "--check-config of a bad file printed '$out'"
  echo "$out"

  status=0
  out=$("$bin" serve --check-config "$scratch/missing.yaml" 2>&1) || status=$?
  [ "$status" -eq 2 ] || fail "--check-config of a missing file exited $status: $out"
  [[ $out == *"cannot open config file '$scratch/missing.yaml'"* ]] || fail "printed '$out'"

  # Opens nothing: valid with a port in use and a Redis no one serves, and answers at once.
  start_serve "$scratch/holder.log" "$bin" serve --listen 127.0.0.1:0
  sed -e "s/^listen: .*/listen: 127.0.0.1:$port/" -e 's|^  url: memory://|  url: redis://127.0.0.1:1|' \
    "$config" >"$scratch/busy.yaml"
  grep -q "^listen: 127.0.0.1:$port$" "$scratch/busy.yaml" || fail "no listen: line in $config"
  out=$(timeout 10 "$bin" serve --check-config "$scratch/busy.yaml") ||
    fail "--check-config of a config on a busy port and an absent Redis exited $?"
  [[ $out == *"listen 127.0.0.1:$port, store redis://127.0.0.1:1" ]] || fail "printed '$out'"
  stop_serve
}

deb() {
  echo "$PACKAGE_DIR/cpack/sluice_${VERSION}-1_$(dpkg --print-architecture).deb"
}
root="${PACKAGE_DIR:-}/root"

build_package() {
  rm -rf "$PACKAGE_DIR"
  mkdir -p "$PACKAGE_DIR"
  (cd "$BUILD_DIR" && "$CPACK" -G DEB -B "$PACKAGE_DIR/cpack") >"$PACKAGE_DIR/cpack.log" 2>&1 ||
    { cat "$PACKAGE_DIR/cpack.log"; fail "cpack failed"; }
  [ -f "$(deb)" ] || { cat "$PACKAGE_DIR/cpack.log"; fail "no $(deb)"; }
  dpkg-deb -x "$(deb)" "$root"
  echo "built $(deb)"
}

check_contents() {
  local files
  files=$(dpkg-deb -c "$(deb)" | awk '$6 !~ /\/$/ {sub(/^\./, "", $6); print $6}')
  echo "$files"
  local lib=/usr/$LIBDIR
  for path in /usr/bin/sluice /etc/sluice/sluice.yaml /lib/systemd/system/sluice.service \
    /usr/share/man/man1/sluice.1.gz /usr/share/doc/sluice/copyright \
    /usr/share/doc/sluice/changelog.Debian.gz "$lib/libsluice.a" "$lib/libsluice_middleware.a" \
    "$lib/pkgconfig/sluice.pc" "$lib/cmake/sluice/sluiceConfig.cmake" \
    "$lib/cmake/sluice/sluiceConfigVersion.cmake" "$lib/cmake/sluice/sluiceTargets.cmake"; do
    grep -qx "$path" <<<"$files" || fail "the package has no $path"
  done
  local header
  while read -r header; do
    grep -qx "/usr/$header" <<<"$files" || fail "the package has no /usr/$header"
  done < <(cd "$SOURCE_DIR" && find include/sluice -type f)
  local stray
  stray=$(grep -vE "^(/usr/bin/sluice|/etc/sluice/sluice.yaml|/lib/systemd/system/sluice.service|/usr/include/sluice/.*|$lib/(libsluice(_middleware)?\.a|pkgconfig/sluice\.pc|cmake/sluice/.*)|/usr/share/man/man1/sluice\.1\.gz|/usr/share/doc/sluice/(copyright|changelog\.Debian\.gz))$" <<<"$files" || true)
  [ -z "$stray" ] || fail "unexpected files in the package: $stray"

  [ "$(dpkg-deb -I "$(deb)" conffiles)" = /etc/sluice/sluice.yaml ] ||
    fail "conffiles: $(dpkg-deb -I "$(deb)" conffiles)"
  cmp "$root/etc/sluice/sluice.yaml" "$SOURCE_DIR/examples/sluice.yaml" ||
    fail "/etc/sluice/sluice.yaml is not examples/sluice.yaml"
  grep -qx 'listen: 127.0.0.1:8080' "$root/etc/sluice/sluice.yaml" || fail "config: listen"
  grep -qE '^  url: memory:// ' "$root/etc/sluice/sluice.yaml" || fail "config: store"

  local field
  dpkg-deb -f "$(deb)"
  [ "$(dpkg-deb -f "$(deb)" Package)" = sluice ] || fail "Package"
  [ "$(dpkg-deb -f "$(deb)" Version)" = "$VERSION-1" ] || fail "Version"
  for field in Maintainer Section Priority Description Depends; do
    [ -n "$(dpkg-deb -f "$(deb)" "$field")" ] || fail "no $field"
  done
  [[ $(zcat "$root/usr/share/doc/sluice/changelog.Debian.gz" | head -1) == "sluice ($VERSION-1) "* ]] ||
    fail "changelog.Debian.gz does not start with version $VERSION-1"
  # Depends, computed by dpkg-shlibdeps, names the package of every library the binary needs
  # itself (its NEEDED entries; or a name that package provides, as in its shlibs file). The
  # libraries those load come with their own packages' Depends.
  local depends needed path package name found
  depends=$(dpkg-deb -f "$(deb)" Depends | sed -E 's/ \([^)]*\)//g; s/, /\n/g')
  while read -r needed path; do
    package=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null ||
      dpkg -S "/usr$path" 2>/dev/null) || fail "no package has $path ($needed)"
    package=${package%%:*}
    found=""
    for name in $package $(dpkg-query -W -f='${Provides}' "$package" | sed -E 's/ \([^)]*\)//g; s/,/ /g'); do
      grep -qx "$name" <<<"$depends" && found=$name
    done
    [ -n "$found" ] || fail "Depends lacks $package, which has $needed: $depends"
  done < <(ldd "$root/usr/bin/sluice" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    grep -F -f <(readelf -d "$root/usr/bin/sluice" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1 /p'))

  local script
  for script in postinst prerm postrm; do
    dpkg-deb --ctrl-tarfile "$(deb)" | tar -xO "./$script" >"$scratch/$script"
    sh -n "$scratch/$script" || fail "$script does not parse"
  done

  # The man page renders without a warning and documents every option of every command.
  local manual
  LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z \
    "$root/usr/share/man/man1/sluice.1.gz" >/dev/null 2>"$scratch/man.err" || fail "man failed"
  [ ! -s "$scratch/man.err" ] || fail "man: $(cat "$scratch/man.err")"
  manual=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$root/usr/share/man/man1/sluice.1.gz" | col -b)
  local command option
  for command in serve simulate bench; do
    grep -q "sluice $command" <<<"$manual" || fail "the man page has no 'sluice $command'"
    for option in $("$root/usr/bin/sluice" "$command" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
      grep -q -- "$option" <<<"$manual" || fail "the man page does not document $command $option"
    done
  done
  for section in SIGNALS "EXIT STATUS" FILES "CONFIGURATION FILE"; do
    grep -q "^$section" <<<"$manual" || fail "the man page has no $section section"
  done
}

# Fails on lintian's errors, and on warnings but those known not to apply (listed).
check_lintian() {
  local out
  out=$(lintian --display-info --pedantic "$(deb)" 2>&1) || true
  echo "$out"
  # initial-upload-closes-no-bugs: the package is not uploaded to Debian, there is no ITP bug.
  local accepted='initial-upload-closes-no-bugs'
  # A build tree configured with the /usr/local default has LIBDIR lib; with -DCMAKE_INSTALL_PREFIX=/usr
  # it is multiarch (lib/x86_64-linux-gnu), where cross-compiling pkg-config looks.
  [[ $LIBDIR == */* ]] || accepted+='|pkg-config-unavailable-for-cross-compilation'
  local bad
  bad=$(grep -E '^(E|W): ' <<<"$out" | grep -vE "^W: sluice: ($accepted) " || true)
  [ -z "$bad" ] || fail "lintian: $bad"
}

check_unit() {
  local unit="$root/lib/systemd/system/sluice.service" directive
  # shellcheck disable=SC2016  # $MAINPID is systemd's
  for directive in 'DynamicUser=yes' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
    'ProtectHome=yes' 'PrivateTmp=yes' 'PrivateDevices=yes' \
    'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' 'CapabilityBoundingSet=' \
    'SystemCallFilter=@system-service' 'Restart=on-failure' \
    'ExecStartPre=/usr/bin/sluice serve --check-config /etc/sluice/sluice.yaml' \
    'ExecStart=/usr/bin/sluice serve --config /etc/sluice/sluice.yaml' \
    'ExecReload=/bin/kill -HUP $MAINPID'; do
    grep -qxF "$directive" "$unit" || fail "sluice.service has no '$directive'"
  done
  local nofile
  nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
  if ! [[ $nofile =~ ^[0-9]+$ ]] || [ "$nofile" -lt 65536 ]; then fail "LimitNOFILE=$nofile"; fi

  # As installed: /usr/bin/sluice and sluice(1) are the package's. verify reports a bad directive
  # on its output, not in its exit status.
  sed "s#/usr/bin/sluice#$root/usr/bin/sluice#g" "$unit" >"$scratch/sluice.service"
  local out
  out=$(MANPATH="$root/usr/share/man" systemd-analyze verify "$scratch/sluice.service" 2>&1) ||
    fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify: $out"
  out=$(systemd-analyze security --offline=true --threshold=15 "$scratch/sluice.service" 2>&1) ||
    { echo "$out"; fail "exposure above 1.5"; }
  grep 'Overall exposure level' <<<"$out"
}

# The syscalls, socket families and memory protections `sluice serve` uses, traced through a start
# (the unit's ExecStartPre and ExecStart), requests, a reload and a stop, on the memory store and on
# Redis, are all what the unit's sandbox admits.
check_sandbox() {
  local bin="$root/usr/bin/sluice" config="$root/etc/sluice/sluice.yaml"
  strace -f -qq -o "$scratch/pre.trace" "$bin" serve --check-config "$config" >/dev/null
  redis-server --port 0 --unixsocket "$scratch/redis.sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$scratch" >"$scratch/redis.log" 2>&1 &
  background_pids+=($!)
  for _ in $(seq 100); do
    [ -S "$scratch/redis.sock" ] && break
    sleep 0.1
  done
  [ -S "$scratch/redis.sock" ] || fail "redis-server did not start: $(cat "$scratch/redis.log")"
  local store
  for store in memory:// "unix://$scratch/redis.sock"; do
    start_serve "$scratch/serve.log" strace -f -qq -o "$scratch/serve-${store%%:*}.trace" \
      "$bin" serve --config "$config" --listen 127.0.0.1:0 --store "$store"
    curl -sf "http://127.0.0.1:$port/v1/check" -d '{"rule":"api","key":"k"}' | grep -q '"allowed":true' ||
      fail "/v1/check on $store"
    curl -sf "http://127.0.0.1:$port/v1/acquire" -d '{"rule":"search","key":"k","max_wait_ms":100}' >/dev/null ||
      fail "/v1/acquire on $store"
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || fail "/readyz on $store"
    curl -sf "http://127.0.0.1:$port/metrics" >/dev/null || fail "/metrics on $store"
    kill -HUP "$signal_pid"
    wait_for_log "$scratch/serve.log" 'reloaded 4 rule(s)'
    stop_serve
  done

  # The unit's filter: its first SystemCallFilter= line allows, each ~ line then removes.
  local unit="$root/lib/systemd/system/sluice.service" allow="" deny="" value
  while read -r value; do
    if [[ $value == "~"* ]]; then deny+=" ${value#\~}"; else allow+=" $value"; fi
  done < <(sed -n 's/^SystemCallFilter=//p' "$unit")
  [ -n "$allow" ] || fail "sluice.service has no SystemCallFilter allow list"
  expand() {
    local item
    for item in "$@"; do
      # shellcheck disable=SC2046  # a group lists its members as words
      case $item in
        @*) expand $(systemd-analyze syscall-filter "$item" | tail -n +2 | sed 's/#.*//') ;;
        *) echo "$item" ;;
      esac
    done
  }
  local allowed denied used
  # shellcheck disable=SC2086  # the lists are words
  allowed=$(comm -23 <(expand $allow | sort -u) <(expand $deny | sort -u))
  used=$(cat "$scratch"/*.trace | sed -nE 's/^[0-9]+ +(<\.\.\. )?([a-z0-9_]+)[( ].*/\2/p' | sort -u)
  echo "syscalls: $(tr '\n' ' ' <<<"$used")"
  [ "$(wc -l <<<"$used")" -gt 20 ] || fail "the traces hold almost no syscall"
  denied=$(comm -23 <(echo "$used") <(echo "$allowed"))
  [ -z "$denied" ] || fail "SystemCallFilter denies $(tr '\n' ' ' <<<"$denied")"
  local families
  families=$(grep -ohE 'socket\(AF_[A-Z0-9]+' "$scratch"/*.trace | sort -u | sed 's/socket(//')
  echo "socket families: $(tr '\n' ' ' <<<"$families")"
  local restricted
  restricted=$(sed -n 's/^RestrictAddressFamilies=//p' "$unit")
  ! grep -vxF "$(tr ' ' '\n' <<<"$restricted")" <<<"$families" ||
    fail "RestrictAddressFamilies=$restricted denies it"
  ! grep -hE '(mmap|mprotect)\(.*PROT_WRITE\|PROT_EXEC|mprotect\(.*PROT_EXEC' "$scratch"/*.trace ||
    fail "MemoryDenyWriteExecute denies it"
  # ProtectSystem=strict, ProcSubset=pid: nothing written outside the Redis socket's directory, no
  # /proc file but the process's own.
  ! grep -hE 'open(at)?\(.*(O_WRONLY|O_RDWR|O_CREAT)' "$scratch"/*.trace | grep -v "\"$scratch/" ||
    fail "ProtectSystem=strict denies it"
  ! grep -hoE 'open(at)?\([^"]*"/proc/[^"]*"' "$scratch"/*.trace | grep -vE '"/proc/(self|thread-self|[0-9]+)/' ||
    fail "ProcSubset=pid hides it"
}

# The packaged command, run from the unpacked tree with the packaged config.
check_serve() {
  local bin="$root/usr/bin/sluice" config="$root/etc/sluice/sluice.yaml"
  check_version "$bin"
  check_config "$bin" "$config"
  start_serve "$scratch/serve.log" "$bin" serve --config "$config" --listen 127.0.0.1:0
  local answer
  answer=$(curl -sf "http://127.0.0.1:$port/v1/check" -d '{"rule":"api","key":"user:42"}')
  echo "/v1/check on port $port: $answer"
  grep -q '"allowed":true,"limit":100,"remaining":19' <<<"$answer" || fail "/v1/check: $answer"
  kill -HUP "$signal_pid"
  wait_for_log "$scratch/serve.log" "reloaded 4 rule(s) from $config"
  stop_serve
}

check_pkg_config() {
  export PKG_CONFIG_PATH="$root/usr/$LIBDIR/pkgconfig"
  [ "$(pkg-config --modversion sluice)" = "$VERSION" ] || fail "--modversion"
  [ "$(realpath "$(pkg-config --variable=libdir sluice)")" = "$(realpath "$root/usr/$LIBDIR")" ] ||
    fail "libdir is $(pkg-config --variable=libdir sluice), not in the unpacked tree"
  pkg-config --cflags --libs sluice
  pkg-config --static --libs sluice >/dev/null
  # The core library and the middleware, through one pkg-config name.
  # shellcheck disable=SC2046  # pkg-config's flags are words
  "$CXX" -std=c++20 "$SOURCE_DIR/tests/package/middleware_consumer.cc" -o "$scratch/consumer" \
    $(pkg-config --cflags --libs sluice)
  "$scratch/consumer"
}

check_find_package() {
  cmake -S "$SOURCE_DIR/tests/install" -B "$scratch/build" -G Ninja -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
  local found
  found=$(sed -n 's/^sluice_DIR:PATH=//p' "$scratch/build/CMakeCache.txt")
  [ "$(realpath "$found")" = "$(realpath "$root/usr/$LIBDIR/cmake/sluice")" ] ||
    fail "find_package(sluice) found $found"
  cmake --build "$scratch/build" >/dev/null
  "$scratch/build/consumer"
}

case=$1
shift
case $case in
  version) check_version "$@" ;;
  check_config) check_config "$@" ;;
  build) build_package ;;
  contents) check_contents ;;
  lintian) check_lintian ;;
  unit) check_unit ;;
  sandbox) check_sandbox ;;
  serve) check_serve ;;
  pkg_config) check_pkg_config ;;
  find_package) check_find_package ;;
  *) fail "unknown case $case" ;;
esac
