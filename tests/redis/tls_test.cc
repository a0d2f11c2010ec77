// Redis over TLS against real redis-servers with a TLS port and certificates made by openssl:
// a verified connection decides; a wrong authority, an expired certificate, a name mismatch or a
// plain-text server fails the connection with the cause named, quickly, and never falls back to
// plain text; a client certificate when the server requires one; the TLS files read again for new
// connections (rotation), a bad file keeping the old ones; a Redis Cluster over TLS, MOVED
// included; TLS URLs and options checked.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster_client.h"
#include "redis/cluster_slots.h"
#include "redis/resp.h"
#include "redis/url.h"
#include "sluice/limit.h"
#include "sluice/redis_store.h"
#include "support/certificates.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using testing::CertificateAuthority;
using testing::IssuedCertificate;
using testing::RedisServer;

// OpenSSL's causes for a chain to an authority not trusted: the server sent its authority's
// certificate along, or only its own.
bool IsUnknownAuthority(const Status& status) {
  return status.message().find("self-signed certificate in certificate chain") !=
             std::string::npos ||
         status.message().find("unable to get local issuer certificate") != std::string::npos;
}

class RedisTls : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = CertificateAuthority::Create();
    ASSERT_NE(ca_, nullptr);
    limit_ = std::make_unique<Limit>(*Limit::Create(Algorithm::kFixedWindow, 1000, 60s));
  }

  std::unique_ptr<RedisServer> Serve(const IssuedCertificate& certificate,
                                     bool auth_clients = false) {
    return RedisServer::StartTls({.cert_file = certificate.cert_file,
                                  .key_file = certificate.key_file,
                                  .ca_file = ca_->ca_file(),
                                  .auth_clients = auth_clients});
  }

  static Result<std::unique_ptr<RedisStore>> Store(const std::string& url,
                                                   const RedisTlsOptions& tls) {
    return RedisStore::Create(RedisStoreOptions{
        .url = url, .timeout = 2s, .connect_timeout = 500ms, .key_prefix = "tls:", .tls = tls});
  }

  Result<Decision> Check(RedisStore& store, const std::string& key) {
    return store.Check(CheckRequest{.scope = "tls", .limit = limit_.get(), .key = key});
  }

  // The first decision within 5 s, or the last error.
  Result<Decision> AwaitDecision(RedisStore& store) {
    Result<Decision> last = Status::Unavailable("not tried");
    const auto start = Steady::now();
    while (Steady::now() - start < 5s) {
      last = Check(store, "k");
      if (last.ok()) return last;
      std::this_thread::sleep_for(20ms);
    }
    return last;
  }

  // The store's checks for 1 s after its connections had time to try (each a refusal, never a
  // decision); the last error.
  Status ExpectNoDecision(RedisStore& store) {
    Status last = Status::Ok();
    const auto start = Steady::now();
    while (Steady::now() - start < 1s) {
      const auto check_start = Steady::now();
      auto r = Check(store, "k");
      EXPECT_LT(Steady::now() - check_start, 2500ms) << "a check waits for no hung handshake";
      if (r.ok()) {
        ADD_FAILURE() << "decided over a connection that should have failed";
        return Status::Ok();
      }
      last = r.status();
      std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(last.code(), StatusCode::kUnavailable) << last.ToString();
    return last;
  }

  std::unique_ptr<CertificateAuthority> ca_;
  std::unique_ptr<Limit> limit_;
};

TEST_F(RedisTls, DecidesOverAVerifiedConnection) {
  auto server = Serve(ca_->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"}));
  ASSERT_NE(server, nullptr);
  for (const char* server_name : {"", "localhost"}) {
    auto store = Store(server->tls_url(), {.ca_file = ca_->ca_file(), .server_name = server_name});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto decision = AwaitDecision(**store);
    ASSERT_TRUE(decision.ok()) << decision.status().ToString();
    EXPECT_TRUE(decision->allowed);
  }
}

TEST_F(RedisTls, RefusesACertificateFromAnotherAuthority) {
  auto server = Serve(ca_->Issue("localhost", {"IP:127.0.0.1"}));
  ASSERT_NE(server, nullptr);
  auto other = CertificateAuthority::Create("another CA");
  ASSERT_NE(other, nullptr);
  auto store = Store(server->tls_url(), {.ca_file = other->ca_file()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Status why = ExpectNoDecision(**store);
  EXPECT_TRUE(IsUnknownAuthority(why)) << why.ToString();
}

TEST_F(RedisTls, RefusesAnExpiredCertificate) {
  auto server = Serve(ca_->Issue("localhost", {"IP:127.0.0.1"}, /*expired=*/true));
  ASSERT_NE(server, nullptr);
  auto store = Store(server->tls_url(), {.ca_file = ca_->ca_file()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Status why = ExpectNoDecision(**store);
  EXPECT_NE(why.message().find("certificate has expired"), std::string::npos) << why.ToString();
}

TEST_F(RedisTls, RefusesACertificateForAnotherName) {
  auto server = Serve(ca_->Issue("localhost", {"DNS:localhost"}));
  ASSERT_NE(server, nullptr);
  // The URL's host, 127.0.0.1, is not in the certificate.
  auto by_address = Store(server->tls_url(), {.ca_file = ca_->ca_file()});
  ASSERT_TRUE(by_address.ok()) << by_address.status().ToString();
  Status why = ExpectNoDecision(**by_address);
  EXPECT_NE(why.message().find("IP address mismatch"), std::string::npos) << why.ToString();
  // Nor is another name.
  auto by_name =
      Store(server->tls_url(), {.ca_file = ca_->ca_file(), .server_name = "cache.example"});
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  why = ExpectNoDecision(**by_name);
  EXPECT_NE(why.message().find("hostname mismatch"), std::string::npos) << why.ToString();
  EXPECT_NE(why.message().find("cache.example"), std::string::npos) << why.ToString();
}

TEST_F(RedisTls, NeverFallsBackToPlainText) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store =
      Store("rediss://127.0.0.1:" + std::to_string(server->port()), {.ca_file = ca_->ca_file()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // Redis waits for the end of a line that never comes: the connect deadline ends the handshake.
  const Status why = ExpectNoDecision(**store);
  EXPECT_NE(why.message().find("TLS handshake"), std::string::npos) << why.ToString();
}

TEST_F(RedisTls, AClientCertificateWhenTheServerRequiresOne) {
  auto server = Serve(ca_->Issue("localhost", {"IP:127.0.0.1"}), /*auth_clients=*/true);
  ASSERT_NE(server, nullptr);
  const IssuedCertificate client = ca_->Issue("sluice", {"DNS:sluice"});
  auto with = Store(
      server->tls_url(),
      {.ca_file = ca_->ca_file(), .cert_file = client.cert_file, .key_file = client.key_file});
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  auto decision = AwaitDecision(**with);
  ASSERT_TRUE(decision.ok()) << decision.status().ToString();

  auto without = Store(server->tls_url(), {.ca_file = ca_->ca_file()});
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  const Status why = ExpectNoDecision(**without);
  EXPECT_NE(why.message().find("certificate required"), std::string::npos) << why.ToString();
}

TEST_F(RedisTls, ReloadedFilesServeNewConnections) {
  auto server = Serve(ca_->Issue("localhost", {"IP:127.0.0.1"}));
  ASSERT_NE(server, nullptr);
  const std::string ca_file = ca_->dir() + "/trusted.pem";
  std::filesystem::copy_file(ca_->ca_file(), ca_file);
  auto store = Store(server->tls_url(), {.ca_file = ca_file});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(AwaitDecision(**store).ok());

  // The server moves to a certificate of a new authority; the connections made stay up.
  auto next = CertificateAuthority::Create("next CA");
  ASSERT_NE(next, nullptr);
  const IssuedCertificate rotated = next->Issue("localhost", {"IP:127.0.0.1"});
  ASSERT_EQ(server->Cli({"CONFIG", "SET", "tls-cert-file", rotated.cert_file, "tls-key-file",
                         rotated.key_file}),
            "OK");
  ASSERT_TRUE(Check(**store, "k").ok()) << "established connections stay";

  // A file that is not there: refused, the files read before stay.
  const Status missing = (*store)->ReloadTls({.ca_file = ca_->dir() + "/missing.pem"});
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("missing.pem"), std::string::npos) << missing.ToString();

  // New connections with the old authority fail ...
  server->Cli({"CLIENT", "KILL", "TYPE", "normal"});
  const Status why = ExpectNoDecision(**store);
  EXPECT_TRUE(IsUnknownAuthority(why)) << why.ToString();
  // ... and with the new one, once read again, succeed.
  std::filesystem::copy_file(next->ca_file(), ca_file,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE((*store)->ReloadTls({.ca_file = ca_file}).ok());
  auto decision = AwaitDecision(**store);
  EXPECT_TRUE(decision.ok()) << decision.status().ToString();
}

TEST_F(RedisTls, BadOptionsAreRefusedAtCreation) {
  auto missing = Store("rediss://127.0.0.1:1", {.ca_file = "/nonexistent/ca.pem"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("ca_file '/nonexistent/ca.pem'"), std::string::npos)
      << missing.status().ToString();

  const IssuedCertificate a = ca_->Issue("a", {"DNS:a"}), b = ca_->Issue("b", {"DNS:b"});
  auto mismatched =
      Store("rediss://127.0.0.1:1", {.cert_file = a.cert_file, .key_file = b.key_file});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(
      mismatched.status().message().find("key_file '" + b.key_file + "': key values mismatch"),
      std::string::npos)
      << mismatched.status().ToString();

  auto half = Store("rediss://127.0.0.1:1", {.cert_file = a.cert_file});
  ASSERT_FALSE(half.ok());

  // TLS options with a plain URL: the 's' is missing, not the encryption silently.
  auto plain = Store("redis://127.0.0.1:1", {.ca_file = ca_->ca_file()});
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("rediss://"), std::string::npos)
      << plain.status().ToString();
}

// A Redis Cluster with tls-cluster yes: the seeds and the nodes CLUSTER SLOTS names (their TLS
// ports) are dialled over TLS, each verified; a MOVED is followed over TLS.
TEST_F(RedisTls, ClusterNodesOverTlsAndMoved) {
  const IssuedCertificate certificate = ca_->Issue("localhost", {"IP:127.0.0.1"});
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::vector<std::string> create = {"--cluster", "create"};
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(RedisServer::StartTls(
        {.cert_file = certificate.cert_file,
         .key_file = certificate.key_file,
         .ca_file = ca_->ca_file()},
        {"--cluster-enabled", "yes", "--tls-cluster", "yes", "--tls-replication", "yes"}));
    ASSERT_NE(nodes.back(), nullptr);
    create.push_back("127.0.0.1:" + std::to_string(nodes.back()->tls_port()));
  }
  create.insert(create.end(),
                {"--cluster-replicas", "0", "--cluster-yes", "--tls", "--cacert", ca_->ca_file()});
  const std::string created = nodes[0]->Cli(create);
  ASSERT_NE(created.find("All 16384 slots covered"), std::string::npos) << created;
  const auto healthy_by = Steady::now() + 30s;
  for (const auto& node : nodes) {
    while (node->Cli({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos &&
           Steady::now() < healthy_by) {
      std::this_thread::sleep_for(50ms);
    }
  }

  auto options = redis::ParseRedisClusterUrl(
      "rediss+cluster://127.0.0.1:" + std::to_string(nodes[0]->tls_port()), {},
      {.ca_file = ca_->ca_file()});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  options->node.timeout = 2s;
  options->node.connect_timeout = 1s;
  options->refresh_interval = 60s;  // the map changes by MOVED alone
  auto client = redis::ClusterClient::Create(std::move(*options));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const redis::Script incr = redis::Script::FromSource("return redis.call('INCR', KEYS[1])");
  auto increment = [&](const std::string& key) -> int64_t {
    const std::string_view keys[] = {key};
    for (int attempt = 0; attempt < 100; ++attempt) {  // until the masters are connected
      auto r = (*client)->EvalShaSyncForTesting(incr, keys, {});
      if (r.ok()) return r->integer;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "no reply for " << key;
    return -1;
  };
  for (int i = 0; i < 30; ++i) ASSERT_EQ(increment("key-" + std::to_string(i)), 1);
  for (const auto& node : nodes) EXPECT_NE(node->Cli({"DBSIZE"}), "0") << "a master unused";

  // An empty slot moved to another master: the client learns it from MOVED.
  const std::string key = "moving";
  const uint16_t slot = redis::KeySlot(key);
  const std::string owner = (*client)->MasterOfForTesting(slot);
  RedisServer* target = nullptr;
  for (const auto& node : nodes) {
    if (owner != "127.0.0.1:" + std::to_string(node->tls_port())) target = node.get();
  }
  ASSERT_NE(target, nullptr);
  const std::string target_id = target->Cli({"CLUSTER", "MYID"});
  for (const auto& node : nodes) {
    ASSERT_EQ(node->Cli({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", target_id}), "OK");
  }
  EXPECT_EQ(increment(key), 1);
  EXPECT_EQ((*client)->cluster_stats_for_testing().moved, 1u);
  EXPECT_EQ(target->Cli({"GET", key}), "1") << "written on the new owner, over TLS";
}

TEST(RedisTlsUrl, SchemesAndTheNameVerified) {
  auto single = redis::ParseRedisUrl("rediss://alice:pw@cache.example:6380/2");
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_NE(single->tls, nullptr);
  EXPECT_EQ(single->tls_server_name, "cache.example");
  EXPECT_EQ(single->port, 6380);
  EXPECT_EQ(single->db, 2);
  auto named = redis::ParseRedisUrl("rediss://10.0.0.1:6380", {}, {.server_name = "cache.example"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->tls_server_name, "cache.example");
  auto plain = redis::ParseRedisUrl("redis://cache.example:6379");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->tls, nullptr);

  auto cluster = redis::ParseRedisClusterUrl("rediss+cluster://a:1,b:2");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_NE(cluster->node.tls, nullptr);
  EXPECT_EQ(cluster->seeds.size(), 2u);
  EXPECT_TRUE(redis::IsClusterUrl("rediss+cluster://a:1"));

  for (const char* unknown : {"redis+tls://h:1", "http://h:1", "rediss:/h:1"}) {
    auto r = redis::ParseRedisUrl(unknown);
    ASSERT_FALSE(r.ok()) << unknown;
    EXPECT_NE(r.status().message().find("rediss+cluster://"), std::string::npos)
        << r.status().ToString();
  }
}

}  // namespace
}  // namespace sluice
