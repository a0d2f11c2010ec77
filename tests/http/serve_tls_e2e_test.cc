// `sluice serve` with server.tls, end to end: HTTPS checks, mTLS (a client certificate from the
// configured authority required at the handshake), a plain HTTP client refused cleanly without a
// decision, certificates rotated under load (by SIGHUP and by the files changing) with no request
// failing and new clients seeing the new certificate, and the server certificates a verifying
// client refuses; acquires over HTTPS; and the close_notify the server sends before closing a
// session (idle, a request read too slowly, a drain, a request refused before it was read whole),
// so that a client can tell the end of the stream from a cut connection. Certificates are made at
// test time by openssl (support/certificates.h).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/certificates.h"
#include "support/raw_connection.h"
#include "support/redis_server.h"
#include "support/reverse_proxy.h"
#include "support/serve_process.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kCheck[] = R"({"rule":"api","key":"user:42"})";

// `sluice serve` with the config `config_yaml`, on a free loopback port.
class TlsService {
 public:
  explicit TlsService(const std::string& config_yaml) : config_(dir_.File("sluice.yaml")) {
    WriteFile(config_, config_yaml);
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
  const std::string& config_path() const { return config_; }
  Process& process() { return *process_; }

 private:
  TempDir dir_;
  std::string config_;
  int port_ = 0;
  std::unique_ptr<Process> process_;
  bool up_ = false;
};

// A config serving the rule `api` with `server` and, for mTLS, `client_ca`.
std::string TlsConfig(const IssuedCertificate& server, const std::string& client_ca = "") {
  return "server: {tls: {cert_file: " + server.cert_file + ", key_file: " + server.key_file +
         (client_ca.empty() ? "" : ", client_ca_file: " + client_ca) +
         "}}\nrules:\n  - { name: api, algorithm: gcra, limit: 1000000, period: 1s }\n";
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

// The value of `series` once it is `expected` (within 5 s), else its last value: the server counts
// a failed handshake after the client has seen it fail.
int64_t MetricOnceAt(httplib::SSLClient& https, std::string_view series, int64_t expected) {
  int64_t value = -1;
  for (int i = 0; i < 100 && (value = Metric(https, series)) != expected; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  return value;
}

// One TLS connection to 127.0.0.1:`port`, verifying the server by `ca_file`, read to its end.
class TlsConnection {
 public:
  TlsConnection(int port, const std::string& ca_file)
      : context_(boost::asio::ssl::context::tls_client), stream_(io_, context_) {
    context_.load_verify_file(ca_file);
    stream_.set_verify_mode(boost::asio::ssl::verify_peer);
    boost::system::error_code ec;
    stream_.next_layer().connect(
        {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
    if (!ec) stream_.handshake(boost::asio::ssl::stream_base::client, ec);
    connected_ = !ec;
  }

  bool connected() const { return connected_; }
  bool Send(std::string_view bytes) {
    boost::system::error_code ec;
    boost::asio::write(stream_, boost::asio::buffer(bytes), ec);
    return !ec;
  }
  // Reads until `text` has come (true), or the connection ends or `timeout` passes (false).
  bool ReadUntil(std::string_view text, std::chrono::milliseconds timeout) {
    return Read([&] { return received_.find(text) != std::string::npos; }, timeout);
  }
  // Reads until the server ends the connection, within `timeout`: the error that ended it, eof
  // for a close_notify (stream_truncated for a connection closed without one), or would_block
  // when it is still open.
  boost::system::error_code ReadToEnd(std::chrono::milliseconds timeout) {
    Read([] { return false; }, timeout);
    return end_;
  }
  const std::string& received() const { return received_; }

 private:
  bool Read(const std::function<bool()>& enough, std::chrono::milliseconds timeout) {
    if (enough()) return true;
    if (end_ != boost::asio::error::would_block) return false;
    bool done = false;
    std::function<void()> next = [&] {
      stream_.async_read_some(boost::asio::buffer(chunk_),
                              [&](boost::system::error_code ec, size_t n) {
                                received_.append(chunk_.data(), n);
                                if (ec) end_ = ec;
                                if (ec || (done = enough())) return;
                                next();
                              });
    };
    next();
    io_.run_for(timeout);
    if (!io_.stopped()) {  // the read still pending: cut it short
      stream_.next_layer().cancel();
      io_.run();
    }
    io_.restart();
    if (end_ == boost::asio::error::operation_aborted) end_ = boost::asio::error::would_block;
    return done;
  }

  boost::asio::io_context io_;
  boost::asio::ssl::context context_;
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream_;
  bool connected_ = false;
  std::array<char, 4096> chunk_;
  std::string received_;
  boost::system::error_code end_ = boost::asio::error::would_block;
};

std::string RawCheck() {
  return "POST /v1/check HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(std::string_view(kCheck).size()) + "\r\n\r\n" + kCheck;
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
  TlsService service(TlsConfig(server_));
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

// An acquire answered at once, then one that waits for its turn (the connection read meanwhile, to
// see the client leave), both on one kept-alive HTTPS connection, which then still checks.
TEST_F(ServeTlsTest, AcquiresAreAnsweredOverTls) {
  std::string config = TlsConfig(server_);
  config += "  - { name: paced, algorithm: gcra, limit: 1, period: 500ms }\n";
  TlsService service(config);
  ASSERT_TRUE(service.up()) << service.process().Log();
  auto https = HttpsClient(service.port(), ca_->ca_file());
  constexpr char kAcquire[] = R"({"rule":"paced","key":"k","max_wait_ms":5000})";
  for (int i = 0; i < 2; ++i) {
    auto acquired = https->Post("/v1/acquire", kAcquire, "application/json");
    ASSERT_TRUE(acquired) << httplib::to_string(acquired.error());
    EXPECT_EQ(acquired->status, 200) << acquired->body;
    EXPECT_NE(acquired->body.find(R"("outcome":"admitted")"), std::string::npos) << acquired->body;
    EXPECT_NE(acquired->get_header_value("Server-Timing"), "");
    // The second waits for the next slot, half a second on: gcra books it.
    if (i == 1) {
      EXPECT_EQ(acquired->body.find(R"("waited_ms":0,)"), std::string::npos) << acquired->body;
    }
  }
  auto checked = https->Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(checked) << httplib::to_string(checked.error());
  EXPECT_EQ(checked->status, 200) << checked->body;
  EXPECT_EQ(Metric(*https, R"(sluice_acquires_total{rule="paced",outcome="admitted"})"), 2);
}

// The server ends a TLS session it closes with a close_notify: once idle past idle_timeout, once a
// request is not read within read_timeout, and at a drain.
TEST_F(ServeTlsTest, TheServerClosesATlsSessionWithCloseNotify) {
  std::string config = TlsConfig(server_);
  config.replace(config.find("server: {"), 9,
                 "server: {read_timeout: 300ms, idle_timeout: 300ms, ");
  TlsService service(config);
  ASSERT_TRUE(service.up()) << service.process().Log();

  TlsConnection idle(service.port(), ca_->ca_file());
  ASSERT_TRUE(idle.connected());
  ASSERT_TRUE(idle.Send(RawCheck()));
  ASSERT_TRUE(idle.ReadUntil(R"("degraded":false})", 10s)) << idle.received();
  // The bound is 300 ms; 10 s allows for a loaded machine.
  boost::system::error_code end = idle.ReadToEnd(10s);
  EXPECT_EQ(end, boost::asio::error::eof) << "idle: " << end.message();

  TlsConnection slow(service.port(), ca_->ca_file());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send("POST /v1/check HTTP/1.1\r\nHost: local"));
  end = slow.ReadToEnd(10s);
  EXPECT_EQ(end, boost::asio::error::eof) << "slow: " << end.message();

  TlsService drained(TlsConfig(server_));
  ASSERT_TRUE(drained.up()) << drained.process().Log();
  TlsConnection kept(drained.port(), ca_->ca_file());
  ASSERT_TRUE(kept.connected());
  ASSERT_TRUE(kept.Send(RawCheck()));
  ASSERT_TRUE(kept.ReadUntil(R"("degraded":false})", 10s)) << kept.received();
  drained.process().Signal(SIGTERM);
  end = kept.ReadToEnd(10s);
  EXPECT_EQ(end, boost::asio::error::eof) << "drained: " << end.message();
  EXPECT_EQ(drained.process().WaitExit(10s), 0) << drained.process().Log();
}

// A request refused before it was read whole (a body or a header above its limit) ends with the
// refusal and then the server's close_notify, while the server reads on what the client still
// sends: the client reads the refusal and an ended stream, neither a cut nor a reset connection.
TEST_F(ServeTlsTest, ARefusalOfARequestNotReadWholeEndsWithCloseNotify) {
  TlsService service(TlsConfig(server_));
  ASSERT_TRUE(service.up()) << service.process().Log();
  const std::string body(70 * 1024, 'x');
  const std::string too_large = "POST /v1/check HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
  const std::string big_header =
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: " + std::string(9000, 'p') +
      "\r\n\r\n";
  for (const auto& [request, status] :
       {std::pair{too_large, "HTTP/1.1 413 "}, std::pair{big_header, "HTTP/1.1 431 "}}) {
    TlsConnection connection(service.port(), ca_->ca_file());
    ASSERT_TRUE(connection.connected());
    ASSERT_TRUE(connection.Send(request));
    ASSERT_TRUE(connection.ReadUntil("}", 10s)) << connection.received();
    EXPECT_TRUE(connection.received().starts_with(status)) << connection.received();
    // Read and dropped, for the second the server lingers: not answered by a reset connection.
    EXPECT_TRUE(connection.Send(std::string(16 * 1024, 'y'))) << status;
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(connection.Send(std::string(16 * 1024, 'y'))) << status;
    // The server lingers a second at most; 10 s allows for a loaded machine.
    const boost::system::error_code end = connection.ReadToEnd(10s);
    EXPECT_EQ(end, boost::asio::error::eof) << status << ": " << end.message();
  }
}

TEST_F(ServeTlsTest, PlainHttpOnTheTlsPortIsRefusedCleanlyWithoutADecision) {
  TlsService service(TlsConfig(server_));
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client plain = LocalClient(service.port());
  auto refused = plain.Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("speaks HTTPS"), std::string::npos) << refused->body;

  auto https = HttpsClient(service.port(), ca_->ca_file());
  EXPECT_EQ(Metric(*https, R"(sluice_checks_total{rule="api",result="allowed"})"), 0);
  EXPECT_EQ(Metric(*https, R"(sluice_checks_total{rule="api",result="denied"})"), 0);
  EXPECT_EQ(MetricOnceAt(*https, "sluice_http_tls_handshake_failures_total", 1), 1);
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
  TlsService service(TlsConfig(server_, clients->ca_file()));
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
  EXPECT_EQ(MetricOnceAt(*with_certificate, "sluice_http_tls_handshake_failures_total", 3), 3);
}

TEST_F(ServeTlsTest, UnderMutualTlsACallerIsKnownByItsCertificatesName) {
  auto clients = CertificateAuthority::Create("clients CA");
  ASSERT_NE(clients, nullptr);
  const IssuedCertificate checkout = clients->Issue("checkout", {"DNS:checkout.internal"});
  const IssuedCertificate billing = clients->Issue("billing", {"URI:spiffe://test/billing"});
  const IssuedCertificate nobody = clients->Issue("nobody", {"DNS:nobody.internal"});
  std::string config = TlsConfig(server_, clients->ca_file());
  config.replace(
      config.find("}}\n"), 3,
      "},\n  auth: {callers: [\n"
      "    {name: checkout, client_san: [checkout.internal], scopes: [check], "
      "rules: [api]},\n"
      "    {name: billing, client_san: [\"spiffe://test/billing\"], scopes: [metrics]}]}}\n");
  config += "  - { name: other, algorithm: gcra, limit: 1000000, period: 1s }\n";
  TlsService service(config);
  ASSERT_TRUE(service.up()) << service.process().Log();

  auto as_checkout = HttpsClient(service.port(), ca_->ca_file(), &checkout);
  auto checked = as_checkout->Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(checked) << httplib::to_string(checked.error());
  EXPECT_EQ(checked->status, 200) << checked->body;
  auto other_rule =
      as_checkout->Post("/v1/check", R"({"rule":"other","key":"k"})", "application/json");
  ASSERT_TRUE(other_rule);
  EXPECT_EQ(other_rule->status, 403) << other_rule->body;
  EXPECT_EQ(as_checkout->Get("/metrics")->status, 403);

  auto as_billing = HttpsClient(service.port(), ca_->ca_file(), &billing);
  EXPECT_EQ(as_billing->Post("/v1/check", kCheck, "application/json")->status, 403);
  auto metrics = as_billing->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);

  // A certificate the authority signed, naming no caller: no one.
  auto as_nobody = HttpsClient(service.port(), ca_->ca_file(), &nobody);
  auto refused = as_nobody->Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401) << refused->body;
  EXPECT_EQ(MetricValue(metrics->body, R"(sluice_checks_total{rule="api",result="allowed"})"), 1);
  EXPECT_EQ(Metric(*as_billing, R"(sluice_checks_total{rule="api",result="allowed"})"), 1);
}

// A client that connects and never sends a ClientHello, or only half of one, holds its connection
// no longer than server.read_timeout; each is counted as a failed handshake.
TEST_F(ServeTlsTest, AHandshakeNeverStartedIsClosedAfterReadTimeout) {
  std::string config = TlsConfig(server_);
  config.replace(config.find("server: {"), 9, "server: {read_timeout: 300ms, ");
  TlsService service(config);
  ASSERT_TRUE(service.up()) << service.process().Log();
  RawConnection silent(service.port());
  RawConnection half(service.port());
  ASSERT_TRUE(silent.connected());
  ASSERT_TRUE(half.connected());
  ASSERT_TRUE(half.Send(std::string("\x16\x03\x01\x02\x00\x01", 6)));  // a record header
  // The bound is 300 ms; 10 s allows for a loaded machine.
  EXPECT_TRUE(silent.ClosedByServer(10s));
  EXPECT_TRUE(half.ClosedByServer(10s));
  auto https = HttpsClient(service.port(), ca_->ca_file());
  EXPECT_EQ(MetricOnceAt(*https, "sluice_http_tls_handshake_failures_total", 2), 2);
}

// Keep-alive clients check without pause while the certificate is replaced twice: once seen by
// the files changing, once by SIGHUP. No request fails, and a new client is served the new
// certificate each time.
TEST_F(ServeTlsTest, CertificatesRotateUnderLoadWithoutAFailedRequest) {
  TempDir live;
  IssuedCertificate files{live.File("tls.crt"), live.File("tls.key")};
  WriteFile(files.cert_file, ReadFile(server_.cert_file));
  WriteFile(files.key_file, ReadFile(server_.key_file));
  TlsService service(TlsConfig(files));
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
    TlsService service(TlsConfig(certificate));
    ASSERT_TRUE(service.up()) << service.process().Log();
    auto https = HttpsClient(service.port(), ca_->ca_file());
    auto answer = https->Post("/v1/check", kCheck, "application/json");
    EXPECT_FALSE(answer) << certificate.cert_file << " was accepted";
  }
}

// A SIGHUP finding a key that is not the certificate's rejects the reload, naming the line; the
// running certificate keeps serving.
TEST_F(ServeTlsTest, AReloadWithAMismatchedKeyKeepsTheRunningCertificate) {
  TempDir live;
  IssuedCertificate files{live.File("tls.crt"), live.File("tls.key")};
  WriteFile(files.cert_file, ReadFile(server_.cert_file));
  WriteFile(files.key_file, ReadFile(server_.key_file));
  TlsService service(TlsConfig(files));
  ASSERT_TRUE(service.up()) << service.process().Log();
  const IssuedCertificate other = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  WriteFile(files.key_file, ReadFile(other.key_file));
  service.process().Signal(SIGHUP);
  EXPECT_TRUE(service.process().WaitForLog(
      "reload rejected, the previous rules stay in force: " + service.config_path() +
      ":1: server.tls.key_file: cannot use '" + files.key_file +
      "': it is not the key of cert_file"))
      << service.process().Log();
  EXPECT_EQ(ServedSerial(service.port()), CertificateSerial(server_.cert_file));
  auto https = HttpsClient(service.port(), ca_->ca_file());
  auto checked = https->Post("/v1/check", kCheck, "application/json");
  ASSERT_TRUE(checked) << httplib::to_string(checked.error());
  EXPECT_EQ(checked->status, 200);
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

// The token examples/nginx/sluice-tls.conf sends, whose SHA-256 sluice-tls.yaml holds.
constexpr char kExampleToken[] = "2b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfe";

// Replaces the one occurrence of `from` in `text`.
void ReplaceOnce(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "the example no longer has '" << from << "'";
  text.replace(at, from.size(), to);
  EXPECT_EQ(text.find(from, at + to.size()), std::string::npos) << "'" << from << "' twice";
}

// examples/nginx/sluice-tls.conf and sluice-tls.yaml as shipped, ports and files moved: nginx
// verifies sluice's certificate (sluice.internal, from the example's authority), sends its token,
// and its clients get the rule's decisions: 5 of 8 admitted at a limit of 5. Then nginx trusting
// another authority gets no decision (its client a 500), and nginx with a token sluice does not
// know gets 401 for its client.
TEST_F(ServeTlsTest, NginxReachesSluiceOverTlsWithItsToken) {
  const IssuedCertificate sluice_certificate =
      ca_->Issue("sluice.internal", {"DNS:sluice.internal"});
  std::string config = ReadFile(SLUICE_SOURCE_DIR "/examples/nginx/sluice-tls.yaml");
  ReplaceOnce(config, "/etc/sluice/tls.crt", sluice_certificate.cert_file);
  ReplaceOnce(config, "/etc/sluice/tls.key", sluice_certificate.key_file);
  ReplaceOnce(config, "algorithm: gcra, limit: 100, period: 1m, burst: 20",
              "algorithm: fixed_window, limit: 5, period: 1h");
  TlsService sluice(config);
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();

  const auto start_nginx = [&](const std::string& trusted, int port, int app_port,
                               const std::string& token = "") {
    std::string http = ReadFile(SLUICE_SOURCE_DIR "/examples/nginx/sluice-tls.conf");
    if (!token.empty()) ReplaceOnce(http, kExampleToken, token);
    ReplaceOnce(http, "server 127.0.0.1:8443;",
                "server 127.0.0.1:" + std::to_string(sluice.port()) + ";");
    ReplaceOnce(http, "server 127.0.0.1:9000;",
                "server 127.0.0.1:" + std::to_string(app_port) + ";");
    ReplaceOnce(http, "listen 127.0.0.1:8000;", "listen 127.0.0.1:" + std::to_string(port) + ";");
    ReplaceOnce(http, "/etc/nginx/sluice-ca.crt", trusted);
    http += "\nserver {\n  listen 127.0.0.1:" + std::to_string(app_port) +
            ";\n  location / { return 200 app; }\n}\n";
    return ReverseProxy::StartNginx(SLUICE_NGINX, http, app_port);
  };
  const int port = FreeLoopbackPort();
  auto nginx = start_nginx(ca_->ca_file(), port, FreeLoopbackPort());
  ASSERT_NE(nginx, nullptr);
  httplib::Client client = LocalClient(port);
  int admitted = 0;
  int limited = 0;
  for (int i = 0; i < 8; ++i) {
    auto answer = client.Get("/");
    ASSERT_TRUE(answer) << nginx->Log();
    if (answer->status == 200 && answer->body == "app") ++admitted;
    if (answer->status == 429) ++limited;
    EXPECT_NE(answer->get_header_value("RateLimit-Policy"), "") << answer->status;
  }
  EXPECT_EQ(admitted, 5) << nginx->Log();
  EXPECT_EQ(limited, 3) << nginx->Log();
  nginx.reset();

  auto another = CertificateAuthority::Create("another CA");
  ASSERT_NE(another, nullptr);
  const int distrustful_port = FreeLoopbackPort();
  auto distrustful = start_nginx(another->ca_file(), distrustful_port, FreeLoopbackPort());
  ASSERT_NE(distrustful, nullptr);
  auto refused = LocalClient(distrustful_port).Get("/");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 500);
  EXPECT_NE(distrustful->Log().find("upstream SSL certificate verify error"), std::string::npos)
      << distrustful->Log();
  distrustful.reset();

  const int stranger_port = FreeLoopbackPort();
  auto stranger = start_nginx(ca_->ca_file(), stranger_port, FreeLoopbackPort(), "not-the-token");
  ASSERT_NE(stranger, nullptr);
  auto unknown = LocalClient(stranger_port).Get("/");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
}

}  // namespace
}  // namespace sluice::testing
