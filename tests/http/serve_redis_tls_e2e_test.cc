// `sluice serve` on Redis over TLS, as a user runs it (the real binary, whose path is this
// program's first argument, on a real redis-server with a TLS port and certificates made by
// openssl): rediss:// with store.tls decides; a SIGHUP reads the TLS files again, so that new
// connections trust a rotated authority; a TLS file that cannot be read refuses the config with
// file, line and field at start (nothing starts) and on SIGHUP (the running config stays); and
// turning verification off is warned about at start.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/certificates.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::CertificateAuthority;
using sluice::testing::FreeLoopbackPort;
using sluice::testing::IssuedCertificate;
using sluice::testing::Process;
using sluice::testing::RedisServer;
using sluice::testing::Service;
using sluice::testing::TempDir;
using sluice::testing::WriteFile;

// fail_closed: a check the store did not decide is refused, so an allowed check was decided by
// Redis.
constexpr const char* kRules = R"(rules:
  - { name: api, algorithm: gcra, limit: 1000, period: 1m, burst: 1000, on_error: fail_closed }
)";

std::unique_ptr<RedisServer> ServeTls(CertificateAuthority& ca) {
  const IssuedCertificate certificate = ca.Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  return RedisServer::StartTls({.cert_file = certificate.cert_file,
                                .key_file = certificate.key_file,
                                .ca_file = ca.ca_file()});
}

// Whether a check is allowed (decided by Redis) within 5 s.
bool AwaitAllowed(httplib::Client& client) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < 5s) {
    auto r = client.Post("/v1/check", R"({"rule":"api","key":"k"})", "application/json");
    if (r && r->status == 200 && json::parse(r->body).value("allowed", false)) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

TEST(ServeRedisTls, DecidesOverRedissAndReadsTheFilesAgainOnSighup) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  auto server = ServeTls(*ca);
  ASSERT_NE(server, nullptr);
  TempDir dir;
  const std::string trusted = dir.File("redis-ca.pem");
  std::filesystem::copy_file(ca->ca_file(), trusted);
  Service service(kRules, server->tls_url(), "tls: {ca_file: " + trusted + "}");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  ASSERT_TRUE(AwaitAllowed(client)) << service.process().Log();
  EXPECT_NE(server->Cli({"KEYS", "*"}), "");

  // The server's certificate rotates to a new authority, which the file now holds; a SIGHUP
  // reads it, and the connections made after (Redis drops those it had) trust it.
  auto next = CertificateAuthority::Create("next CA");
  ASSERT_NE(next, nullptr);
  const IssuedCertificate rotated = next->Issue("localhost", {"IP:127.0.0.1"});
  ASSERT_EQ(server->Cli({"CONFIG", "SET", "tls-cert-file", rotated.cert_file, "tls-key-file",
                         rotated.key_file}),
            "OK");
  std::filesystem::copy_file(next->ca_file(), trusted,
                             std::filesystem::copy_options::overwrite_existing);
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded")) << service.process().Log();
  server->Cli({"CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_TRUE(AwaitAllowed(client)) << service.process().Log();
}

TEST(ServeRedisTls, AnUnreadableTlsFileIsRefused) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  auto server = ServeTls(*ca);
  ASSERT_NE(server, nullptr);
  const std::string error =
      ":3: store.tls.ca_file: cannot read '/nonexistent/redis-ca.pem': No such file or directory";
  const std::string bad_store = "store:\n  url: " + server->tls_url() +
                                "\n  tls: {ca_file: /nonexistent/redis-ca.pem}\n" + kRules;

  TempDir dir;
  const std::string config = dir.File("sluice.yaml");
  WriteFile(config, bad_store);
  Process process(
      {"serve", "--config", config, "--listen", "127.0.0.1:" + std::to_string(FreeLoopbackPort())},
      dir.File("serve.log"));
  EXPECT_EQ(process.WaitExit(5s), 2) << process.Log();
  EXPECT_NE(process.Log().find(config + error), std::string::npos) << process.Log();
  EXPECT_EQ(process.Log().find("serving on"), std::string::npos) << process.Log();

  Service service(kRules, server->tls_url(), "tls: {ca_file: " + ca->ca_file() + "}");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  ASSERT_TRUE(AwaitAllowed(client)) << service.process().Log();
  WriteFile(service.config_path(), bad_store);
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reload rejected")) << service.process().Log();
  EXPECT_NE(service.process().Log().find(service.config_path() + error), std::string::npos)
      << service.process().Log();
  server->Cli({"CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_TRUE(AwaitAllowed(client)) << "the files read at start still serve new connections";
}

TEST(ServeRedisTls, TurningVerificationOffIsWarnedAbout) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  auto server = ServeTls(*ca);
  ASSERT_NE(server, nullptr);
  Service service(kRules, server->tls_url(), "tls: {insecure_skip_verify: true}");
  ASSERT_TRUE(service.up()) << service.process().Log();
  EXPECT_TRUE(service.process().WaitForLog("store.tls.insecure_skip_verify is on"))
      << service.process().Log();
  httplib::Client client = service.Client();
  EXPECT_TRUE(AwaitAllowed(client)) << service.process().Log();
}

}  // namespace
