// The gRPC port of the rate limit service in the real `sluice serve`, behind its doors: TLS
// (a plaintext client fails cleanly, with no decision), mutual TLS with rls.tls.client_san (only
// verified certificates carrying an allowed name connect: not another authority's, not an expired
// one, not one with another name, not none), server.auth's callers by token metadata or by
// client certificate (UNAUTHENTICATED, PERMISSION_DENIED, counted per reason, never against a
// limit), and a certificate rotated under load (no call fails, established channels are kept, a
// new client sees the new certificate; a certificate without its key, or an authority file
// caught half written, is not served until whole).
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "support/certificates.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace sluice::testing {
namespace {

namespace pb = envoy::service::ratelimit::v3;
using std::chrono::milliseconds;
using std::chrono::seconds;

// SHA-256 of "checkout-token" and "ops-token" (printf %s TOKEN | sha256sum).
constexpr std::string_view kCheckoutHash =
    "f73b9044d0a39db82876ca2560ec62234efc73e2560689b5b5a3fc92f70904e3";
constexpr std::string_view kOpsHash =
    "d9310c002af91822beb0b3487d8b04f85bf6bf1f8a5496bff7d35fc7c5a29def";

constexpr uint32_t kPerDay = 1000;

struct Answer {
  grpc::Status status;
  pb::RateLimitResponse response;
  std::string server_pem;  // the certificate the server presented
};

class ServeRlsTls : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    ca_ = CertificateAuthority::Create();
    ASSERT_NE(ca_, nullptr);
    server_cert_ = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
    ASSERT_FALSE(server_cert_.cert_file.empty());
    std::filesystem::create_directory(dir_.File("rls"));
    WriteFile(dir_.File("rls/api.yaml"),
              "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, "
              "requests_per_unit: " +
                  std::to_string(kPerDay) + " }\n");
  }

  // `sluice serve` with the gRPC port's `tls` fields and more top-level YAML (`server`).
  void Start(const std::string& tls_fields, const std::string& server_yaml = "") {
    grpc_port_ = FreeLoopbackPort();
    service_ = std::make_unique<Service>(
        server_yaml + "rls: { config_dir: \"" + dir_.File("rls") +
        "\", grpc_listen: \"127.0.0.1:" + std::to_string(grpc_port_) + "\", watch: false, tls: {" +
        tls_fields + "} }\nrules:\n  - { name: api, algorithm: gcra, limit: 10, period: 1s }\n");
    ASSERT_TRUE(service_->up()) << service_->process().Log();
  }

  std::string ServerTls() const {
    return "cert_file: \"" + server_cert_.cert_file + "\", key_file: \"" + server_cert_.key_file +
           "\"";
  }

  // A channel of its own (no connection shared with another channel), trusting `ca_`, presenting
  // `client` when given.
  std::shared_ptr<grpc::Channel> TlsChannel(const IssuedCertificate* client = nullptr) const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFile(ca_->ca_file());
    if (client != nullptr) {
      options.pem_private_key = ReadFile(client->key_file);
      options.pem_cert_chain = ReadFile(client->cert_file);
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(Target(), grpc::SslCredentials(options), args);
  }

  std::string Target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }

  static Answer Ask(grpc::Channel& channel, const std::string& user,
                    const std::string& domain = "api", const std::string& authorization = "") {
    pb::RateLimitRequest request;
    request.set_domain(domain);
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value(user);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    Answer answer;
    auto stub = pb::RateLimitService::NewStub(
        std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
    answer.status = stub->ShouldRateLimit(&context, request, &answer.response);
    if (auto auth = context.auth_context()) {
      for (const auto& pem : auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME)) {
        answer.server_pem.assign(pem.data(), pem.size());
      }
    }
    return answer;
  }

  // What `user` has left of the day, after one more call admitted (through `channel`, with
  // `authorization`).
  static uint32_t RemainingAfterOne(grpc::Channel& channel, const std::string& user,
                                    const std::string& authorization = "") {
    const Answer answer = Ask(channel, user, "api", authorization);
    EXPECT_TRUE(answer.status.ok()) << answer.status.error_message();
    return answer.response.statuses_size() == 1 ? answer.response.statuses(0).limit_remaining() : 0;
  }

  // A series of /metrics, read as the caller ops (server.auth guards /metrics too).
  int64_t Metric(const std::string& series) {
    auto metrics = service_->Client().Get("/metrics", {{"Authorization", "Bearer ops-token"}});
    EXPECT_TRUE(metrics);
    return metrics ? MetricValue(metrics->body, series) : -1;
  }

  TempDir dir_;
  std::unique_ptr<CertificateAuthority> ca_;
  IssuedCertificate server_cert_;
  int grpc_port_ = 0;
  std::unique_ptr<Service> service_;
};

TEST_F(ServeRlsTls, ServesTlsAndAPlaintextClientFailsWithoutADecision) {
  Start(ServerTls());
  auto tls = TlsChannel();
  EXPECT_EQ(RemainingAfterOne(*tls, "a"), kPerDay - 1);

  auto plaintext = grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials());
  const Answer refused = Ask(*plaintext, "a");
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  EXPECT_EQ(refused.response.statuses_size(), 0);
  EXPECT_EQ(RemainingAfterOne(*tls, "a"), kPerDay - 2) << "the plaintext call counted nothing";
  EXPECT_EQ(service_->process().Stop(seconds(10)), 0) << service_->process().Log();
}

TEST_F(ServeRlsTls, MutualTlsAdmitsOnlyVerifiedCertificatesWithAnAllowedName) {
  Start(ServerTls() + ", client_ca_file: \"" + ca_->ca_file() +
        "\", client_san: [envoy.mesh.internal, \"spiffe://mesh/envoy\"]");
  const IssuedCertificate envoy = ca_->Issue("envoy", {"DNS:envoy.mesh.internal"});
  const IssuedCertificate spiffe = ca_->Issue("envoy2", {"URI:spiffe://mesh/envoy"});
  const IssuedCertificate other_name = ca_->Issue("other", {"DNS:other.mesh.internal"});
  const IssuedCertificate expired = ca_->Issue("envoy", {"DNS:envoy.mesh.internal"}, true);
  auto other_ca = CertificateAuthority::Create("another CA");
  ASSERT_NE(other_ca, nullptr);
  const IssuedCertificate foreign = other_ca->Issue("envoy", {"DNS:envoy.mesh.internal"});

  EXPECT_EQ(RemainingAfterOne(*TlsChannel(&envoy), "a"), kPerDay - 1);
  EXPECT_EQ(RemainingAfterOne(*TlsChannel(&spiffe), "a"), kPerDay - 2);
  const std::vector<std::pair<std::string, const IssuedCertificate*>> refused = {
      {"no certificate", nullptr},
      {"a name not allowed", &other_name},
      {"expired", &expired},
      {"another authority", &foreign}};
  for (const auto& [what, cert] : refused) {
    const Answer answer = Ask(*TlsChannel(cert), "a");
    EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << what << ": " << answer.status.error_message();
    EXPECT_EQ(answer.response.statuses_size(), 0) << what;
  }
  EXPECT_EQ(RemainingAfterOne(*TlsChannel(&envoy), "a"), kPerDay - 3)
      << "the refused clients counted nothing";
}

TEST_F(ServeRlsTls, CallersByTokenOrCertificateAndRefusalsCountNothing) {
  const std::string callers =
      "server:\n  auth:\n    callers:\n"
      "      - {name: checkout, token_sha256: \"" +
      std::string(kCheckoutHash) +
      "\", scopes: [check], domains: [api]}\n"
      "      - {name: ops, token_sha256: \"" +
      std::string(kOpsHash) +
      "\", scopes: [metrics]}\n"
      "      - {name: envoy, client_san: [envoy.mesh.internal], scopes: [check], "
      "domains: [api]}\n";
  Start(ServerTls() + ", client_ca_file: \"" + ca_->ca_file() + "\"", callers);
  const IssuedCertificate envoy = ca_->Issue("envoy", {"DNS:envoy.mesh.internal"});
  const IssuedCertificate nobody = ca_->Issue("nobody", {"DNS:nobody.mesh.internal"});
  auto as_envoy = TlsChannel(&envoy);
  auto as_nobody = TlsChannel(&nobody);

  // Identified by the certificate, or by the token whatever the certificate.
  EXPECT_EQ(RemainingAfterOne(*as_envoy, "a"), kPerDay - 1);
  EXPECT_EQ(RemainingAfterOne(*as_nobody, "a", "Bearer checkout-token"), kPerDay - 2);

  struct Refused {
    std::shared_ptr<grpc::Channel> channel;
    std::string domain, authorization;
    grpc::StatusCode code;
  };
  for (const Refused& r : std::vector<Refused>{
           {as_nobody, "api", "", grpc::StatusCode::UNAUTHENTICATED},
           {as_envoy, "api", "Bearer wrong-token", grpc::StatusCode::UNAUTHENTICATED},
           {as_nobody, "api", "Bearer ops-token", grpc::StatusCode::PERMISSION_DENIED},
           {as_nobody, "other", "Bearer checkout-token", grpc::StatusCode::PERMISSION_DENIED},
           {as_envoy, "other", "", grpc::StatusCode::PERMISSION_DENIED},
       }) {
    const Answer answer = Ask(*r.channel, "a", r.domain, r.authorization);
    EXPECT_EQ(answer.status.error_code(), r.code)
        << r.domain << " " << r.authorization << ": " << answer.status.error_message();
    EXPECT_EQ(answer.response.statuses_size(), 0);
    EXPECT_EQ(answer.status.error_message().find("-token"), std::string::npos)
        << "no token in an error: " << answer.status.error_message();
  }
  EXPECT_EQ(RemainingAfterOne(*as_envoy, "a"), kPerDay - 3) << "the refused calls counted nothing";

  EXPECT_EQ(Metric("sluice_rls_auth_refused_total{reason=\"missing\"}"), 0);
  EXPECT_EQ(Metric("sluice_rls_auth_refused_total{reason=\"unknown\"}"), 2);
  EXPECT_EQ(Metric("sluice_rls_auth_refused_total{reason=\"scope\"}"), 1);
  EXPECT_EQ(Metric("sluice_rls_auth_refused_total{reason=\"rule\"}"), 2);
  EXPECT_EQ(service_->process().Log().find("checkout-token"), std::string::npos);

  // Failed authentications from one address are throttled: past kMaxAuthFailuresPerSecond in a
  // second, refused unread (bounded: 200 calls or 20 s).
  bool throttled = false;
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  for (int i = 0; i < 200 && !throttled && std::chrono::steady_clock::now() < until; ++i) {
    throttled =
        Ask(*as_nobody, "a", "api", "Bearer guess" + std::to_string(i)).status.error_code() ==
        grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_TRUE(throttled);
  EXPECT_GE(Metric("sluice_rls_auth_refused_total{reason=\"throttled\"}"), 1);
}

// The certificate is rotated as a deploy does it: a new directory, then the symlink the config
// names swapped to it. Calls on established channels go on all along, none failing; a new client
// soon sees the new certificate's serial, and the old channels are still answered.
TEST_F(ServeRlsTls, RotatedCertificateServesNewClientsAndKeepsEstablishedOnes) {
  std::filesystem::create_directory(dir_.File("tls-1"));
  std::filesystem::copy_file(server_cert_.cert_file, dir_.File("tls-1/cert.pem"));
  std::filesystem::copy_file(server_cert_.key_file, dir_.File("tls-1/key.pem"));
  std::filesystem::create_directory_symlink(dir_.File("tls-1"), dir_.File("current"));
  Start("cert_file: \"" + dir_.File("current/cert.pem") + "\", key_file: \"" +
        dir_.File("current/key.pem") + "\"");
  auto first = TlsChannel();
  const Answer before = Ask(*first, "before");
  ASSERT_TRUE(before.status.ok()) << before.status.error_message();
  const std::string old_serial = CertificateSerial(server_cert_.cert_file);

  std::atomic<bool> stop{false};
  std::atomic<int> calls{0}, failures{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 2; ++t) {
    load.emplace_back([&, t] {
      auto channel = TlsChannel();
      for (int i = 0; !stop.load() && i < 100'000; ++i) {
        const Answer answer = Ask(*channel, "load" + std::to_string(t) + "-" + std::to_string(i));
        calls.fetch_add(1);
        if (!answer.status.ok()) failures.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(300));

  const IssuedCertificate next = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  const std::string new_serial = CertificateSerial(next.cert_file);
  ASSERT_NE(new_serial, old_serial);
  std::filesystem::create_directory(dir_.File("tls-2"));
  std::filesystem::copy_file(next.cert_file, dir_.File("tls-2/cert.pem"));
  std::filesystem::copy_file(next.key_file, dir_.File("tls-2/key.pem"));
  std::filesystem::create_directory_symlink(dir_.File("tls-2"), dir_.File("next"));
  std::filesystem::rename(dir_.File("next"), dir_.File("current"));
  service_->process().Signal(SIGHUP);

  // A new client sees the new serial within 20 s (the files are re-read every second).
  std::string seen;
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    const Answer fresh = Ask(*TlsChannel(), "fresh");
    ASSERT_TRUE(fresh.status.ok()) << fresh.status.error_message();
    WriteFile(dir_.File("seen.pem"), fresh.server_pem);
    seen = CertificateSerial(dir_.File("seen.pem"));
    if (seen == new_serial) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(seen, new_serial);
  std::this_thread::sleep_for(milliseconds(300));
  stop = true;
  for (auto& thread : load) thread.join();
  EXPECT_GT(calls.load(), 0);
  EXPECT_EQ(failures.load(), 0) << "of " << calls.load() << " calls under rotation";

  // The first channel, made before the rotation, is still answered on its connection.
  const Answer after = Ask(*first, "after");
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  WriteFile(dir_.File("first.pem"), after.server_pem);
  EXPECT_EQ(CertificateSerial(dir_.File("first.pem")), old_serial)
      << "the established connection was kept, not redone";
}

// A certificate written without its key (a rotation half done, not through a directory swap) is
// reported on SIGHUP, without the key's contents; once the key follows, new clients get the new
// certificate. (Between the two, gRPC's file watcher serves the mismatched pair: new handshakes
// fail; README "Replacing envoyproxy/ratelimit" says to rotate by swapping a directory.)
// A rotation caught half done (certbot updates its links one at a time): the new certificate is
// written and its key is not yet. It is reported, and not served: new clients keep the previous
// pair, past several polls of the files and refreshes of gRPC's reader, until the key follows.
TEST_F(ServeRlsTls, ACertificateWithoutItsKeyIsReportedAndNotServedUntilTheKeyFollows) {
  const std::string cert = dir_.File("cert.pem");
  const std::string key = dir_.File("key.pem");
  std::filesystem::copy_file(server_cert_.cert_file, cert);
  std::filesystem::copy_file(server_cert_.key_file, key);
  Start("cert_file: \"" + cert + "\", key_file: \"" + key + "\"");
  const std::string old_serial = CertificateSerial(server_cert_.cert_file);

  const IssuedCertificate next = ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  WriteFile(cert, ReadFile(next.cert_file));
  service_->process().Signal(SIGHUP);
  EXPECT_TRUE(service_->process().WaitForLog("is not the key of")) << service_->process().Log();
  EXPECT_EQ(service_->process().Log().find("PRIVATE KEY"), std::string::npos);

  const auto half_done_until = std::chrono::steady_clock::now() + seconds(4);
  int fresh_clients = 0;
  while (std::chrono::steady_clock::now() < half_done_until) {
    const Answer fresh = Ask(*TlsChannel(), "half-done");
    ASSERT_TRUE(fresh.status.ok())
        << "a new client during the half-done rotation: " << fresh.status.error_message();
    WriteFile(dir_.File("seen.pem"), fresh.server_pem);
    ASSERT_EQ(CertificateSerial(dir_.File("seen.pem")), old_serial);
    ++fresh_clients;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_GT(fresh_clients, 0);

  WriteFile(key, ReadFile(next.key_file));
  const std::string new_serial = CertificateSerial(next.cert_file);
  std::string seen;
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (seen != new_serial && std::chrono::steady_clock::now() < until) {
    const Answer fresh = Ask(*TlsChannel(), "fresh");
    ASSERT_TRUE(fresh.status.ok()) << fresh.status.error_message();
    WriteFile(dir_.File("seen.pem"), fresh.server_pem);
    seen = CertificateSerial(dir_.File("seen.pem"));
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(seen, new_serial);
}

TEST_F(ServeRlsTls, AnAuthorityFileCaughtHalfWrittenKeepsThePreviousAuthorities) {
  const std::string authorities = dir_.File("clients-ca.pem");
  std::filesystem::copy_file(ca_->ca_file(), authorities);
  Start(ServerTls() + ", client_ca_file: \"" + authorities + "\"");
  const IssuedCertificate client = ca_->Issue("envoy", {"DNS:envoy.mesh.internal"});
  auto next_ca = CertificateAuthority::Create("next CA");
  ASSERT_NE(next_ca, nullptr);
  const IssuedCertificate next_client = next_ca->Issue("envoy", {"DNS:envoy.mesh.internal"});
  EXPECT_EQ(RemainingAfterOne(*TlsChannel(&client), "a"), kPerDay - 1);

  const std::string pem = ReadFile(next_ca->ca_file());
  WriteFile(authorities, pem.substr(0, pem.size() / 2));
  service_->process().Signal(SIGHUP);
  EXPECT_TRUE(service_->process().WaitForLog("client_ca_file")) << service_->process().Log();

  const auto half_done_until = std::chrono::steady_clock::now() + seconds(4);
  int fresh_clients = 0;
  while (std::chrono::steady_clock::now() < half_done_until) {
    const Answer fresh = Ask(*TlsChannel(&client), "half-done");
    ASSERT_TRUE(fresh.status.ok())
        << "a client of the previous authority during the half-written rotation: "
        << fresh.status.error_message();
    ++fresh_clients;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_GT(fresh_clients, 0);

  WriteFile(authorities, pem);
  grpc::Status refused;
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    refused = Ask(*TlsChannel(&client), "previous").status;
    if (!refused.ok() && Ask(*TlsChannel(&next_client), "next").status.ok()) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "the previous authority's clients are refused once the new authority is whole";
  EXPECT_EQ(RemainingAfterOne(*TlsChannel(&next_client), "b"), kPerDay - 1)
      << "the new authority's clients are served";
}

}  // namespace
}  // namespace sluice::testing
