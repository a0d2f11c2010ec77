// `sluice serve` with server.tls, end to end: HTTPS checks, mTLS (a client certificate from the
// configured authority required at the handshake), a plain HTTP client refused cleanly without a
// decision, certificates rotated under load (by SIGHUP and by the files changing) with no request
// failing and new clients seeing the new certificate, and the server certificates a verifying
// client refuses. Certificates are made at test time by openssl (support/certificates.h).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/certificates.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kCheck[] = R"({"rule":"api","key":"user:42"})";

// `sluice serve` with server.tls from `tls_yaml`, on a free loopback port.
class TlsService {
 public:
  explicit TlsService(const std::string& tls_yaml) : config_(dir_.File("sluice.yaml")) {
    WriteFile(config_, "server: {tls: " + tls_yaml +
                           "}\n"
                           "rules:\n"
                           "  - { name: api, algorithm: gcra, limit: 1000000, period: 1s }\n");
    for (int attempt = 0; attempt < 5 && !up_; ++attempt) {
      port_ = FreeLoopbackPort();
      const std::string address = "127.0.0.1:" + std::to_string(port_);
      process_ = std::make_unique<Process>(
          std::vector<std::string>{"serve", "--config", config_, "--listen", address,
                                   "--io-threads", "2"},
          dir_.File("serve.log"));
      up_ = process_->WaitForLog("serving on " + address, 10s);
      // Another test's server may take the port between its choice and the bind.
      if (process_->Log().find("cannot listen on") == std::string::npos) break;
    }
  }

  bool up() const { return up_; }
  int port() const { return port_; }
  Process& process() { return *process_; }

 private:
  TempDir dir_;
  std::string config_;
  int port_ = 0;
  std::unique_ptr<Process> process_;
  bool up_ = false;
};

std::string TlsYaml(const IssuedCertificate& server, const std::string& client_ca = "") {
  return "{cert_file: " + server.cert_file + ", key_file: " + server.key_file +
         (client_ca.empty() ? "" : ", client_ca_file: " + client_ca) + "}";
}

// A keep-alive HTTPS client to 127.0.0.1:`port` that verifies the server by `ca_file`, and
// presents `client` when given.
std::unique_ptr<httplib::SSLClient> HttpsClient(int port, const std::string& ca_file,
                                                const IssuedCertificate* client = nullptr) {
  auto https = client ? std::make_unique<httplib::SSLClient>("127.0.0.1", port, client->cert_file,
                                                             client->key_file)
                      : std::make_unique<httplib::SSLClient>("127.0.0.1", port);
  https->set_ca_cert_path(ca_file.c_str());
  https->enable_server_certificate_verification(true);
  https->set_connection_timeout(5s);
  https->set_read_timeout(5s);
  https->set_keep_alive(true);
  return https;
}

// The serial number of the certificate a new TLS client to 127.0.0.1:`port` is served.
std::string ServedSerial(int port) {
  const std::string command = "openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                              " </dev/null 2>/dev/null | openssl x509 -noout -serial";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 256> chunk;
    while (fgets(chunk.data(), chunk.size(), pipe) != nullptr) out += chunk.data();
    pclose(pipe);
  }
  const size_t equals = out.find('=');
  if (equals == std::string::npos) return "";
  std::string serial = out.substr(equals + 1);
  while (!serial.empty() && (serial.back() == '\n' || serial.back() == '\r')) serial.pop_back();
  return serial;
}

int64_t Metric(httplib::SSLClient& https, std::string_view series) {
  auto metrics = https.Get("/metrics");
  if (!metrics || metrics->status != 200) return -1;
  return MetricValue(metrics->body, series);
}

class ServeTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // OpenSSL writes to a connection the server refused with send(), which raises SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    ca_ = CertificateAuthority::Create();
    ASSERT_NE(ca_, nullptr);
    server_ = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
    ASSERT_FALSE(server_.cert_file.empty());
  }

  std::unique_ptr<CertificateAuthority> ca_;
  IssuedCertificate server_;
};

TEST_F(ServeTlsTest, ChecksAreAnsweredOverTls) {
  TlsService service(TlsYaml(server_));
  ASSERT_TRUE(service.up()) << service.process().Log();
  auto https = HttpsClient(service.port(), ca_->ca_file());
  for (int i = 0; i < 3; ++i) {  // on one kept-alive connection
    auto checked = https->Post("/v1/check", kCheck, "application/json");
    ASSERT_TRUE(checked) << httplib::to_string(checked.error());
    EXPECT_EQ(checked->status, 200) << checked->body;
    EXPECT_NE(checked->body.find("\"allowed\":true"), std::string::npos) << checked->body;
  }
  EXPECT_EQ(Metric(*https, R"(sluice_checks_total{rule="api",result="allowed"})"), 3);
  EXPECT_EQ(Metric(*https, "sluice_http_tls_handshake_failures_total"), 0);
}

TEST_F(ServeTlsTest, PlainHttpOnTheTlsPortIsRefusedCleanlyWithoutADecision) {
  TlsService service(TlsYaml(server_));
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client plain = LocalClient(service.port());
  auto refused = plain.Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("speaks HTTPS"), std::string::npos) << refused->body;

  auto https = HttpsClient(service.port(), ca_->ca_file());
  EXPECT_EQ(Metric(*https, R"(sluice_checks_total{rule="api",result="allowed"})"), 0);
  EXPECT_EQ(Metric(*https, R"(sluice_checks_total{rule="api",result="denied"})"), 0);
  EXPECT_EQ(Metric(*https, "sluice_http_tls_handshake_failures_total"), 1);
  EXPECT_TRUE(service.process().WaitForLog("plain HTTP sent to the TLS port"));
}

TEST_F(ServeTlsTest, MutualTlsTakesOnlyCertificatesOfTheClientAuthority) {
  auto clients = CertificateAuthority::Create("clients CA");
  auto strangers = CertificateAuthority::Create("another CA");
  ASSERT_NE(clients, nullptr);
  ASSERT_NE(strangers, nullptr);
  const IssuedCertificate checkout =
      clients->Issue("checkout", {"DNS:checkout.internal", "URI:spiffe://test/checkout"});
  const IssuedCertificate expired = clients->Issue("checkout", {"DNS:checkout.internal"}, true);
  const IssuedCertificate foreign = strangers->Issue("checkout", {"DNS:checkout.internal"});
  TlsService service(TlsYaml(server_, clients->ca_file()));
  ASSERT_TRUE(service.up()) << service.process().Log();

  auto with_certificate = HttpsClient(service.port(), ca_->ca_file(), &checkout);
  auto checked = with_certificate->Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(checked) << httplib::to_string(checked.error());
  EXPECT_EQ(checked->status, 200) << checked->body;

  for (const IssuedCertificate* refused :
       {static_cast<const IssuedCertificate*>(nullptr), &expired, &foreign}) {
    auto https = HttpsClient(service.port(), ca_->ca_file(), refused);
    auto answer = https->Post("/v1/check", kCheck, "application/json");
    EXPECT_FALSE(answer) << "answered " << answer->status << " to "
                         << (refused ? refused->cert_file : "no certificate");
  }
  EXPECT_EQ(Metric(*with_certificate, R"(sluice_checks_total{rule="api",result="allowed"})"), 1);
  EXPECT_EQ(Metric(*with_certificate, "sluice_http_tls_handshake_failures_total"), 3);
}

// Keep-alive clients check without pause while the certificate is replaced twice: once seen by
// the files changing, once by SIGHUP. No request fails, and a new client is served the new
// certificate each time.
TEST_F(ServeTlsTest, CertificatesRotateUnderLoadWithoutAFailedRequest) {
  TempDir live;
  IssuedCertificate files{live.File("tls.crt"), live.File("tls.key")};
  WriteFile(files.cert_file, ReadFile(server_.cert_file));
  WriteFile(files.key_file, ReadFile(server_.key_file));
  TlsService service(TlsYaml(files));
  ASSERT_TRUE(service.up()) << service.process().Log();
  ASSERT_EQ(ServedSerial(service.port()), CertificateSerial(server_.cert_file));

  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      auto https = HttpsClient(service.port(), ca_->ca_file());
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      while (!stop && std::chrono::steady_clock::now() < deadline) {
        auto checked = https->Post("/v1/check", kCheck, "application/json");
        ++(checked && checked->status == 200 ? answered : failed);
      }
    });
  }
  const auto rotate = [&](const IssuedCertificate& next) {
    // Key, then certificate, each replaced whole: in between the pair does not match, and the
    // current certificate must stay.
    WriteFile(files.key_file, ReadFile(next.key_file));
    std::this_thread::sleep_for(1500ms);
    WriteFile(files.cert_file, ReadFile(next.cert_file));
  };
  const auto served = [&](const IssuedCertificate& expected) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ServedSerial(service.port()) == CertificateSerial(expected.cert_file)) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };

  const IssuedCertificate second = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  rotate(second);  // seen by the watch on the files
  EXPECT_TRUE(served(second));

  const IssuedCertificate third = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  rotate(third);
  service.process().Signal(SIGHUP);
  EXPECT_TRUE(service.process().WaitForLog("reloaded 1 rule(s)"));
  EXPECT_TRUE(served(third));

  stop = true;
  for (auto& client : clients) client.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(answered, 100);
  EXPECT_TRUE(service.process().WaitForLog("keeping the current certificate"))
      << service.process().Log();
}

// What a client that verifies the server sees of a server certificate that is expired, from
// another authority, or for another name: a failed handshake, no answer.
TEST_F(ServeTlsTest, AVerifyingClientRefusesABadServerCertificate) {
  auto another = CertificateAuthority::Create("another CA");
  ASSERT_NE(another, nullptr);
  const std::vector<IssuedCertificate> bad = {
      ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"}, /*expired=*/true),
      another->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"}),
      ca_->Issue("elsewhere", {"DNS:elsewhere.example", "IP:10.9.9.9"}),
  };
  for (const IssuedCertificate& certificate : bad) {
    TlsService service(TlsYaml(certificate));
    ASSERT_TRUE(service.up()) << service.process().Log();
    auto https = HttpsClient(service.port(), ca_->ca_file());
    auto answer = https->Post("/v1/check", kCheck, "application/json");
    EXPECT_FALSE(answer) << certificate.cert_file << " was accepted";
  }
}

TEST_F(ServeTlsTest, AKeyThatIsNotTheCertificatesIsRefusedWithItsLine) {
  const IssuedCertificate other = ca_->Issue("localhost", {"DNS:localhost"});
  TempDir dir;
  const std::string config = dir.File("sluice.yaml");
  WriteFile(config,
            "rules:\n  - { name: api, algorithm: gcra, limit: 10, period: 1s }\n"
            "server:\n  tls:\n    cert_file: " +
                server_.cert_file + "\n    key_file: " + other.key_file + "\n");
  Process check({"serve", "--check-config", config}, dir.File("check.log"));
  EXPECT_EQ(check.WaitExit(10s), 2);
  EXPECT_NE(check.Log().find("sluice.yaml:6: server.tls.key_file: cannot use '" + other.key_file +
                             "': it is not the key of cert_file"),
            std::string::npos)
      << check.Log();
}

}  // namespace
}  // namespace sluice::testing
