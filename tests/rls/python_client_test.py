#!/usr/bin/python3
"""A second, independent client of the rate limit service: Debian's python3-grpcio with stubs
generated at test time (grpc_tools.protoc) from the repository's protos, against the real
`sluice serve`, in plaintext and over mutual TLS with callers' tokens (certificates made by the
openssl command). Usage: python_client_test.py SLUICE_BINARY PROTO_DIR OUT_DIR"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


def openssl(directory, *args):
    subprocess.run(["openssl", *args], cwd=directory, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def issue(directory, ca, name, sans):
    """A key and a certificate signed by `ca` (its .pem and .key in `directory`) for `name`."""
    key, csr, cert, ext = (os.path.join(directory, name + suffix)
                           for suffix in (".key", ".csr", ".pem", ".ext"))
    with open(ext, "w") as f:
        f.write("basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth, clientAuth\n"
                "subjectAltName = %s\n" % ",".join(sans))
    openssl(directory, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    openssl(directory, "req", "-new", "-key", key, "-out", csr, "-subj", "/CN=" + name)
    openssl(directory, "x509", "-req", "-in", csr, "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", cert)
    return cert, key


def read(path):
    with open(path, "rb") as f:
        return f.read()


# The gRPC port over mutual TLS with server.auth's callers: Envoy's client certificate and a
# caller's token in the `authorization` metadata, as grpcio sends them.
class PythonTlsClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        ca = os.path.join(d, "ca")
        openssl(d, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", ca + ".key")
        openssl(d, "req", "-x509", "-new", "-key", ca + ".key", "-out", ca + ".pem", "-days", "1",
                "-subj", "/CN=python test CA")
        cls.ca = ca + ".pem"
        server_cert, server_key = issue(d, ca, "localhost", ["DNS:localhost", "IP:127.0.0.1"])
        cls.envoy = issue(d, ca, "envoy", ["DNS:envoy.mesh.internal"])
        cls.other = issue(d, ca, "other", ["DNS:other.mesh.internal"])
        rls_dir = os.path.join(d, "rls")
        os.mkdir(rls_dir)
        with open(os.path.join(rls_dir, "shop.yaml"), "w") as f:
            f.write(DOMAIN)
        cls.grpc_port = free_port()
        config = os.path.join(d, "sluice.yaml")
        # SHA-256 of "checkout-token".
        checkout = "f73b9044d0a39db82876ca2560ec62234efc73e2560689b5b5a3fc92f70904e3"
        with open(config, "w") as f:
            f.write('listen: "127.0.0.1:%d"\n' % free_port())
            f.write("server:\n  auth:\n    callers:\n")
            f.write('      - {name: checkout, token_sha256: "%s", scopes: [check], '
                    "domains: [shop]}\n" % checkout)
            f.write("      - {name: envoy, client_san: [envoy.mesh.internal], scopes: [check], "
                    "domains: [other]}\n")
            f.write('rls: { config_dir: "%s", grpc_listen: "127.0.0.1:%d", watch: false,\n'
                    '       tls: { cert_file: "%s", key_file: "%s", client_ca_file: "%s" } }\n'
                    % (rls_dir, cls.grpc_port, server_cert, server_key, cls.ca))
            f.write("rules: [ { name: api, algorithm: gcra, limit: 10, period: 1s } ]\n")
        cls.log = open(os.path.join(d, "serve.log"), "w+")
        cls.process = subprocess.Popen([SLUICE, "serve", "--config", config],
                                       stdout=cls.log, stderr=subprocess.STDOUT)

    @classmethod
    def tearDownClass(cls):
        if cls.process.poll() is None:
            cls.process.kill()
        cls.process.wait(timeout=10)
        cls.log.close()
        cls.dir.cleanup()

    def channel(self, client):
        import grpc
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(self.ca),
            private_key=read(client[1]) if client else None,
            certificate_chain=read(client[0]) if client else None)
        channel = grpc.secure_channel("127.0.0.1:%d" % self.grpc_port, credentials,
                                      options=(("grpc.ssl_target_name_override", "localhost"),
                                               ("grpc.use_local_subchannel_pool", 1)))
        self.addCleanup(channel.close)
        return channel

    def ask(self, client, domain, token=None):
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
        from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
        request = rls_pb2.RateLimitRequest(domain=domain)
        request.descriptors.add().entries.append(
            ratelimit_pb2.RateLimitDescriptor.Entry(key=b"user", value=b"carol"))
        metadata = (("authorization", "Bearer " + token),) if token else None
        stub = rls_pb2_grpc.RateLimitServiceStub(self.channel(client))
        return stub.ShouldRateLimit(request, timeout=10, metadata=metadata, wait_for_ready=False)

    def code(self, *args, **kwargs):
        import grpc
        try:
            self.ask(*args, **kwargs)
            return grpc.StatusCode.OK
        except grpc.RpcError as error:
            return error.code()

    def test_mutual_tls_and_tokens(self):
        import grpc
        from envoy.service.ratelimit.v3 import rls_pb2
        deadline = time.monotonic() + 10
        while self.code(self.other, "shop", "checkout-token") == grpc.StatusCode.UNAVAILABLE:
            self.assertLess(time.monotonic(), deadline, "the service never came up")
            time.sleep(0.1)
        # The token identifies checkout, whose domain shop is: carol's first of 2 a day is spent.
        # Envoy's certificate identifies envoy, whose domain shop is not.
        self.assertEqual(self.code(self.envoy, "shop"), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(self.code(self.other, "shop"), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.code(self.other, "shop", "not-a-token"),
                         grpc.StatusCode.UNAUTHENTICATED)
        # No client certificate: no connection, no decision.
        self.assertEqual(self.code(None, "shop", "checkout-token"), grpc.StatusCode.UNAVAILABLE)
        # The refused calls spent nothing: carol has her second request still.
        answer = self.ask(self.other, "shop", "checkout-token")
        self.assertEqual(answer.overall_code, rls_pb2.RateLimitResponse.OK)
        self.assertEqual(answer.statuses[0].limit_remaining, 0)
        self.assertNotIn(b"not-a-token", read(self.log.name))
        self.process.send_signal(signal.SIGTERM)
        self.assertEqual(self.process.wait(timeout=10), 0)


if __name__ == "__main__":
    generate_stubs()
    unittest.main(argv=[sys.argv[0], "-v"])
