#!/usr/bin/python3
"""A second, independent client of the rate limit service: Debian's python3-grpcio with stubs
generated at test time (grpc_tools.protoc) from the repository's protos, against the real
`sluice serve`. Usage: python_client_test.py SLUICE_BINARY PROTO_DIR OUT_DIR"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

SLUICE, PROTO_DIR, OUT_DIR = sys.argv[1:4]
STUBS = os.path.join(OUT_DIR, "rls_python_stubs")


def generate_stubs():
    from grpc_tools import protoc
    os.makedirs(STUBS, exist_ok=True)
    protos = [
        "envoy/type/v3/ratelimit_unit.proto",
        "envoy/config/core/v3/base.proto",
        "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
        "envoy/service/ratelimit/v3/rls.proto",
    ]
    for proto in protos:
        code = protoc.main(["protoc", "-I" + PROTO_DIR, "-I/usr/include",
                            "--python_out=" + STUBS, "--grpc_python_out=" + STUBS, proto])
        if code != 0:
            raise RuntimeError("protoc failed on " + proto)
    sys.path.insert(0, STUBS)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Days: on the real clock, no window starts mid-test (but at midnight UTC).
DOMAIN = """domain: shop
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2, name: per_user }
  - key: internal
    rate_limit: { unlimited: true }
  - key: device
    detailed_metric: true
    rate_limit: { unit: day, requests_per_unit: 5 }
"""


class PythonClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        cls.dir = tempfile.TemporaryDirectory()
        rls_dir = os.path.join(cls.dir.name, "rls")
        os.mkdir(rls_dir)
        with open(os.path.join(rls_dir, "shop.yaml"), "w") as f:
            f.write(DOMAIN)
        cls.grpc_port = free_port()
        config = os.path.join(cls.dir.name, "sluice.yaml")
        cls.http_port = free_port()
        with open(config, "w") as f:
            f.write('listen: "127.0.0.1:%d"\n' % cls.http_port)
            f.write('rls: { config_dir: "%s", grpc_listen: "127.0.0.1:%d", '
                    'x_ratelimit_headers: true }\n' % (rls_dir, cls.grpc_port))
            f.write("rules: [ { name: api, algorithm: gcra, limit: 10, period: 1s } ]\n")
        cls.log = open(os.path.join(cls.dir.name, "serve.log"), "w+")
        cls.process = subprocess.Popen([SLUICE, "serve", "--config", config],
                                       stdout=cls.log, stderr=subprocess.STDOUT)
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.grpc_port)
        grpc.channel_ready_future(cls.channel).result(timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        if cls.process.poll() is None:
            cls.process.kill()
        cls.process.wait(timeout=10)
        cls.log.close()
        cls.dir.cleanup()

    def ask(self, *descriptors, hits_addend=0):
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
        from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
        request = rls_pb2.RateLimitRequest(domain="shop", hits_addend=hits_addend)
        for entries in descriptors:
            d = request.descriptors.add()
            for key, value in entries:
                # bytes in sluice's protos (wire-compatible with Envoy's string): str as UTF-8.
                key, value = (x.encode() if isinstance(x, str) else x for x in (key, value))
                d.entries.append(ratelimit_pb2.RateLimitDescriptor.Entry(key=key, value=value))
        stub = rls_pb2_grpc.RateLimitServiceStub(self.channel)
        return stub.ShouldRateLimit(request, timeout=10)

    def test_should_rate_limit(self):
        from envoy.service.ratelimit.v3 import rls_pb2
        Response = rls_pb2.RateLimitResponse
        first = self.ask([("user", "alice")], [("internal", "x")])
        self.assertEqual(first.overall_code, Response.OK)
        self.assertEqual(first.statuses[0].code, Response.OK)
        self.assertEqual(first.statuses[0].current_limit.requests_per_unit, 2)
        self.assertEqual(first.statuses[0].current_limit.unit, Response.RateLimit.DAY)
        self.assertEqual(first.statuses[0].current_limit.name, "per_user")
        self.assertEqual(first.statuses[0].limit_remaining, 1)
        self.assertEqual(first.statuses[1].limit_remaining, 2**32 - 1)
        headers = {h.key: h.value for h in first.response_headers_to_add}
        self.assertEqual(headers["RateLimit-Policy"], '"per_user";q=2;w=86400')
        self.assertEqual(headers["X-RateLimit-Remaining"], "1")

        self.assertEqual(self.ask([("user", "alice")]).overall_code, Response.OK)
        third = self.ask([("user", "alice")])
        self.assertEqual(third.overall_code, Response.OVER_LIMIT)
        self.assertEqual(third.statuses[0].code, Response.OVER_LIMIT)
        self.assertIn("Retry-After", {h.key for h in third.response_headers_to_add})
        # Another user, and an unconfigured descriptor, are not limited.
        self.assertEqual(self.ask([("user", "bob")], hits_addend=2).overall_code, Response.OK)
        other = self.ask([("region", "eu")])
        self.assertEqual(other.overall_code, Response.OK)
        self.assertFalse(other.statuses[0].HasField("current_limit"))

    def metrics(self):
        import urllib.request
        url = "http://127.0.0.1:%d/metrics" % self.http_port
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode("utf-8")  # strict: the exposition format is UTF-8

    def metric(self, series):
        for line in self.metrics().splitlines():
            if line.startswith(series + " "):
                return int(line.split(" ")[1])
        return 0

    # Envoy passes a header's bytes on as they come, 0xFF included (never in UTF-8): such a value
    # is decided and counted like any other, under its own bytes.
    def test_bytes_that_are_not_utf8(self):
        from envoy.service.ratelimit.v3 import rls_pb2
        Response = rls_pb2.RateLimitResponse
        hits_before = self.metric('sluice_rls_total_hits{key="shop.user"}')
        over_before = self.metric('sluice_rls_over_limit{key="shop.user"}')
        answers = [self.ask([("user", b"\xff\xfe")]) for _ in range(3)]
        self.assertEqual([a.overall_code for a in answers],
                         [Response.OK, Response.OK, Response.OVER_LIMIT])
        self.assertEqual([a.statuses[0].limit_remaining for a in answers], [1, 0, 0])
        self.assertEqual(self.metric('sluice_rls_total_hits{key="shop.user"}'), hits_before + 3)
        self.assertEqual(self.metric('sluice_rls_over_limit{key="shop.user"}'), over_before + 1)
        # Its own counter: not another invalid value's, nor that of U+FFFD (what a lossy decoding
        # would make of it), nor a prefix's.
        for other in (b"\xff\xfd", "\ufffd\ufffd", b"\xff"):
            self.assertEqual(self.ask([("user", other)]).statuses[0].limit_remaining, 1, other)
        # A detailed_metric names its stats by the value: by its hash when not UTF-8, which
        # /metrics must be (metrics() decodes strictly), and so is the header it names.
        for _ in range(2):
            device = self.ask([("device", b"\xc3\x28\xff")])
            self.assertEqual(device.overall_code, Response.OK)
        self.assertEqual(device.statuses[0].limit_remaining, 3)
        hashed = [line for line in self.metrics().splitlines()
                  if line.startswith('sluice_rls_total_hits{key="sha256:')]
        self.assertEqual(len(hashed), 1, hashed)
        self.assertTrue(hashed[0].endswith(" 2"), hashed)
        policy = {h.key: h.value for h in device.response_headers_to_add}["RateLimit-Policy"]
        self.assertTrue(policy.startswith('"sha256:'), policy)

    def test_stops_on_sigterm(self):
        # Runs last (alphabetical order): the service stops cleanly.
        self.process.send_signal(signal.SIGTERM)
        self.assertEqual(self.process.wait(timeout=10), 0)


if __name__ == "__main__":
    generate_stubs()
    unittest.main(argv=[sys.argv[0], "-v"])
