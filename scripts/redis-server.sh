# shellcheck shell=bash
# Sourced by the bench scripts: a redis-server of their own, on a free loopback port with no
# persistence, in a temporary directory that goes with it when the script exits. Sets `dir` and
# `port`, and defines `cli` (redis-cli on that server).
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null
stop_redis_server() {
  local pid
  pid=$(cat "$dir/redis.pid" 2>/dev/null) && kill "$pid" 2>/dev/null &&
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -rf "$dir"
}
trap stop_redis_server EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
