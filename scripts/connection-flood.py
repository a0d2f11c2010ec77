#!/usr/bin/env python3
"""Floods a running `sluice serve` with connections from this host and measures what a
legitimate client sees meanwhile (docs/security.md quotes its figures).

  scripts/connection-flood.py --port 8080 --pid $(pidof sluice) --connections 15000 [--half]

Opens --connections TCP connections that send nothing (or, with --half, half a request each and
nothing more), then times 21 POST /v1/check on a connection kept alive from before the flood and
21 on new connections, and prints their medians, the service's RSS and its connection metrics.
"""
import argparse
import http.client
import resource
import socket
import statistics
import time

CHECK = b'{"rule":"api","key":"legit"}'
HALF_REQUEST = b"POST /v1/check HTTP/1.1\r\nHost: x\r\n"


def timed_check(connection):
    start = time.perf_counter()
    connection.request("POST", "/v1/check", CHECK)
    response = connection.getresponse()
    response.read()
    elapsed = (time.perf_counter() - start) * 1000
    return elapsed, response.status


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--half", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    print(f"RSS before: {rss_mib(args.pid):.1f} MiB")
    kept = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
    timed_check(kept)
    flood = []
    for _ in range(args.connections):
        s = socket.create_connection(("127.0.0.1", args.port))
        if args.half:
            s.sendall(HALF_REQUEST)
        flood.append(s)
    time.sleep(1)
    print(f"RSS with {len(flood)} {'half-sent' if args.half else 'silent'} connections: "
          f"{rss_mib(args.pid):.1f} MiB")

    def measure(label, connect):
        samples = []
        for _ in range(21):
            try:
                samples.append(timed_check(connect()))
            except (OSError, http.client.HTTPException) as e:
                samples.append((float("nan"), type(e).__name__))
        times = [t for t, _ in samples]
        statuses = sorted({str(s) for _, s in samples})
        print(f"{label}: median {statistics.median(times):.2f} ms, max {max(times):.2f} ms, "
              f"statuses {', '.join(statuses)}")

    measure("check on a connection kept alive from before", lambda: kept)
    measure("check on a new connection (connect included)",
            lambda: http.client.HTTPConnection("127.0.0.1", args.port, timeout=10))

    def connected():
        connection = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
        connection.connect()
        return connection

    measure("check on a new connection (connect excluded)", connected)
    for s in flood:
        s.close()
    time.sleep(1)
    metrics = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
    metrics.request("GET", "/metrics")
    for line in metrics.getresponse().read().decode().splitlines():
        if line.startswith(("sluice_http_connections", "sluice_http_idle", "sluice_http_accept")):
            print(line)


if __name__ == "__main__":
    main()
