#!/usr/bin/env python3
"""What a flood of distinct keys costs the other rules of a `sluice serve` on a Redis with a
maxmemory, under each maxmemory-policy (docs/failure-modes.md quotes its figures).

  scripts/redis-key-flood.py --sluice build/release/sluice [--maxmemory 20mb] [--seconds 10]
                             [--policies noeviction,volatile-ttl,volatile-lru,allkeys-lru]

For each policy: starts a redis-server on a free loopback port (persistence off) and `sluice
serve` on it, with every rule failing open. Before the flood, 1000 keys of `spent` (5 per hour)
spend their limit, and one key of `busy` (5 per hour) too. Then two connections post batches of
1000 distinct keys of the `flood` rule for --seconds, while `busy` is checked every 20 ms and
`new` checks a new key every 100 ms (a user arriving, whom Redis has never seen). After the flood
each `spent` key is checked once more: admitted means Redis lost its state. Prints per policy:
the keys the flood sent, when a flood key was first refused and when Redis first evicted a key,
how many it evicted and refused (OOM), how often the breaker opened, what the checks of `busy`
and `new` were answered (admitted, denied, 503, fail_open), and how many `spent` keys were
admitted again.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

SPENT = 1000  # keys whose limit is spent before the flood

CONFIG = """store: {{url: "redis://127.0.0.1:{redis_port}", timeout_ms: 1000}}
rules:
  - {{name: flood, algorithm: sliding_window, limit: 100, period: 1h, on_error: fail_open}}
  - {{name: busy, algorithm: fixed_window, limit: 5, period: 1h, on_error: fail_open}}
  - {{name: spent, algorithm: fixed_window, limit: 5, period: 1h, on_error: fail_open}}
  - {{name: new, algorithm: gcra, limit: 5, period: 1h, on_error: fail_open}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_info(port, section):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", section],
                         capture_output=True, text=True).stdout
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def wait_until(predicate, timeout):
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def check(connection, rule, key):
    body = json.dumps({"rule": rule, "key": key})
    connection.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


def classify(status, body):
    if status == 503:
        return "503"
    if status in (200, 429):
        decision = json.loads(body)
        if decision.get("source") == "fail_open":
            return "fail_open"
        return "admitted" if decision["allowed"] else "denied"
    return str(status)


def batch(connection, checks):
    connection.request("POST", "/v1/check", json.dumps({"checks": checks}),
                       {"Content-Type": "application/json"})
    return json.loads(connection.getresponse().read())["results"]


def victim(port, rule, interval, stop, counts):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    n = 0
    while not stop.is_set():
        key = f"user:{n}" if rule == "new" else "victim"
        n += 1
        outcome = classify(*check(connection, rule, key))
        counts[outcome] = counts.get(outcome, 0) + 1
        stop.wait(interval)


def flood(port, worker, stop, stats):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    batch = 0
    while not stop.is_set():
        keys = [f"f{worker}:{batch}:{i}" for i in range(1000)]
        body = json.dumps({"checks": [{"rule": "flood", "key": k} for k in keys]})
        connection.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        items = json.loads(response.read()).get("results", [])
        stats["sent"] += len(keys)
        if stats["full_at"] is None and any("error" in item for item in items):
            stats["full_at"] = time.monotonic()
        stats["fail_open"] += sum(1 for item in items if item.get("source") == "fail_open")
        batch += 1


def run(policy, args):
    redis_port, serve_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as directory:
        redis = subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--maxmemory", args.maxmemory, "--maxmemory-policy", policy,
             "--dir", directory], stdout=subprocess.DEVNULL)
        serve = None
        try:
            wait_until(lambda: subprocess.run(["redis-cli", "-p", str(redis_port), "PING"],
                                              capture_output=True).returncode == 0, 5)
            config = os.path.join(directory, "sluice.yaml")
            with open(config, "w") as f:
                f.write(CONFIG.format(redis_port=redis_port))
            log = open(os.path.join(directory, "serve.log"), "w")
            serve = subprocess.Popen([args.sluice, "serve", "--config", config, "--listen",
                                      f"127.0.0.1:{serve_port}"], stdout=log, stderr=log)

            def ready():
                try:
                    c = http.client.HTTPConnection("127.0.0.1", serve_port, timeout=1)
                    c.request("GET", "/readyz")
                    return c.getresponse().status == 200
                except OSError:
                    return False

            if not wait_until(ready, 10):
                sys.exit(f"sluice serve did not become ready: {open(log.name).read()}")
            warm = http.client.HTTPConnection("127.0.0.1", serve_port, timeout=5)
            for _ in range(5):
                check(warm, "busy", "victim")
            spend = [{"rule": "spent", "key": f"s{i}", "cost": 5} for i in range(SPENT)]
            batch(warm, spend)

            stop = threading.Event()
            counts = {"busy": {}, "new": {}}
            stats = {"sent": 0, "full_at": None, "evicted_at": None, "fail_open": 0}
            start = time.monotonic()
            threads = [threading.Thread(target=victim, args=(serve_port, "busy", 0.02, stop,
                                                             counts["busy"])),
                       threading.Thread(target=victim, args=(serve_port, "new", 0.1, stop,
                                                             counts["new"]))]
            threads += [threading.Thread(target=flood, args=(serve_port, w, stop, stats))
                        for w in range(2)]
            for t in threads:
                t.start()
            while time.monotonic() < start + args.seconds:
                if (stats["evicted_at"] is None and
                        int(redis_info(redis_port, "stats").get("evicted_keys", 0)) > 0):
                    stats["evicted_at"] = time.monotonic()
                time.sleep(0.1)
            stop.set()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - start
            # Each spent key checked once more: admitted if Redis lost its state.
            again = batch(warm, [{"rule": "spent", "key": f"s{i}"} for i in range(SPENT)])
            lost = sum(1 for item in again
                       if item.get("allowed") is True and item.get("source") == "store")
            again_open = sum(1 for item in again if item.get("source") == "fail_open")
            metrics = http.client.HTTPConnection("127.0.0.1", serve_port, timeout=5)
            metrics.request("GET", "/metrics")
            opens = [line.split()[-1] for line in metrics.getresponse().read().decode().splitlines()
                     if line.startswith("sluice_breaker_opens_total")]
            keys = redis_info(redis_port, "keyspace").get("db0", "keys=0").split(",")[0]
            evicted = redis_info(redis_port, "stats").get("evicted_keys", "?")
            oom = redis_info(redis_port, "errorstats").get("errorstat_OOM", "count=0")
            full = (f"{stats['full_at'] - start:.1f} s" if stats["full_at"] else "never")
            first_eviction = (f"{stats['evicted_at'] - start:.1f} s" if stats["evicted_at"]
                              else "never")
            print(f"{policy}: flood sent {stats['sent']} keys in {elapsed:.1f} s "
                  f"({stats['sent'] / elapsed:.0f}/s), {stats['fail_open']} decided by fail_open; "
                  f"a flood key first refused after {full}; "
                  f"first eviction after {first_eviction}; evicted {evicted} keys; "
                  f"OOM replies {oom.split('=')[1]}; Redis holds {keys.split('=')[1]} keys; "
                  f"breaker opened {opens[0] if opens else '?'} "
                  f"times")
            for rule in ("busy", "new"):
                line = ", ".join(f"{k} {v}" for k, v in sorted(counts[rule].items()))
                print(f"  {rule}: {line}")
            print(f"  spent: {lost} of {SPENT} keys admitted again by Redis after the flood (state "
                  f"lost), {again_open} by fail_open")
            if args.verbose:
                print(open(log.name).read())
        finally:
            if serve:
                serve.terminate()
                serve.wait(10)
            redis.terminate()
            redis.wait(10)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sluice", required=True)
    parser.add_argument("--maxmemory", default="20mb")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--verbose", action="store_true", help="print sluice serve's log")
    parser.add_argument("--policies", default="noeviction,volatile-ttl,volatile-lru,allkeys-lru")
    args = parser.parse_args()
    for policy in args.policies.split(","):
        run(policy, args)


if __name__ == "__main__":
    main()
