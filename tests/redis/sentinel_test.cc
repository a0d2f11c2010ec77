// Redis Sentinel, on real processes: a master, its replica and three sentinels
// (support/redis_sentinel.h). The redis+sentinel:// URL's forms and refusals; a RedisStore that
// finds the master through the sentinels, with the master's password and the sentinels' own
// apart; a config refused at its line for a bad store URL; and two `sluice serve` processes (the
// binary is this program's first argument) under an HTTP load through a SENTINEL FAILOVER and a
// kill -9 of the master: every answer within the deadline plus the HTTP margin, the new master
// used within 1 s of the sentinels' +switch-master, no script ever run on a server while it is a
// replica, and the admissions the failover lost (asynchronous replication) counted and printed.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/sentinel_client.h"
#include "redis/sentinel_link.h"
#include "redis/tls_context.h"
#include "redis/url.h"
#include "sluice/limit.h"
#include "sluice/open_store.h"
#include "sluice/store.h"
#include "support/certificates.h"
#include "support/decision_counts.h"
#include "support/redis_acl.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"
#include "support/serve_process.h"
#include "support/stall_watch.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::Micros;
using sluice::testing::Millis;
using sluice::testing::RaiseTo;
using sluice::testing::RedisSentinel;
using sluice::testing::SentinelSetup;
using sluice::testing::Service;
using Steady = std::chrono::steady_clock;

constexpr const char* kMasterPassword = "master-secret-1";
constexpr const char* kSentinelPassword = "sentinel-secret-2";

SentinelSetup WithPasswords() {
  return {.master_password = kMasterPassword, .sentinel_password = kSentinelPassword};
}

TEST(SentinelUrl, ParsesTheSentinelsTheMasterNameAndTheMastersCredentials) {
  auto parsed = sluice::redis::ParseRedisSentinelUrl(
      "redis+sentinel://app:pw@10.0.0.1:26379,sentinel-b,10.0.0.3:26380/billing");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->sentinels,
            (std::vector<std::string>{"10.0.0.1:26379", "sentinel-b:26379", "10.0.0.3:26380"}));
  EXPECT_EQ(parsed->master_name, "billing");
  EXPECT_EQ(parsed->master.user, "app");
  EXPECT_EQ(parsed->master.password, "pw");
  EXPECT_FALSE(parsed->tls);
  auto tls = sluice::redis::ParseRedisSentinelUrl("rediss+sentinel://h:1/m");
  ASSERT_TRUE(tls.ok());
  EXPECT_TRUE(tls->tls);

  for (const char* bad : {"redis+sentinel://:hunter2@h1:26379,h2:26379",
                          "redis+sentinel://:hunter2@h1:26379,h2:26379/", "redis+sentinel:///m",
                          "redis+sentinel://h1:0/m", "redis+sentinel://h1:26379/a/b"}) {
    auto refused = sluice::redis::ParseRedisSentinelUrl(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().message().find("hunter2"), std::string::npos)
        << refused.status().message();
  }
  EXPECT_NE(sluice::redis::ParseRedisSentinelUrl("redis+sentinel://h1,h2")
                .status()
                .message()
                .find("master's name"),
            std::string::npos);
  EXPECT_EQ(sluice::redis::RedactedUrl("redis+sentinel://u:hunter2@h1:1,h2:2/m"),
            "redis+sentinel://u:***@h1:1,h2:2/m");
  // With the password given apart, the URL may only name the user.
  EXPECT_FALSE(sluice::redis::ParseRedisSentinelUrl("redis+sentinel://u:pw@h/m", "apart").ok());
  EXPECT_EQ(
      sluice::redis::ParseRedisSentinelUrl("redis+sentinel://u@h/m", "apart")->master.password,
      "apart");
}

TEST(SentinelStore, FindsTheMasterWithItsPasswordApartFromTheSentinels) {
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  const int master = group->server(0).port(), replica = group->server(1).port();
  auto store = sluice::OpenStore(group->url(), {.timeout = 200ms,
                                                .sentinel_password = std::string(kSentinelPassword),
                                                .connections_per_thread = 1});
  ASSERT_TRUE(store.ok()) << store.status().message();
  const sluice::Limit limit = *sluice::Limit::Create(sluice::Algorithm::kFixedWindow, 5, 1h);
  for (int i = 0; i < 6; ++i) {
    auto d = (*store)->Check({.scope = "api", .limit = &limit, .key = "tenant"});
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->allowed, i < 5) << i;
  }
  EXPECT_GT(group->EvalShaCalls(master), 0);
  // The store's one connection asked ROLE in its handshake, and nothing asked it again.
  const std::string stats = group->Cli(master, {"INFO", "commandstats"});
  EXPECT_NE(stats.find("cmdstat_role:calls=1,"), std::string::npos) << stats;
  EXPECT_EQ(group->EvalShaCalls(replica), 0) << "a script ran on the replica";
  EXPECT_NE(group->Cli(master, {"KEYS", "sluice:*"}).find("tenant"), std::string::npos);

  // The sentinels' password wrong, missing, or the master's given in its place: no master is
  // found, checks fail as an outage, and no error shows a password.
  for (const std::string sentinel_password : {"wrong", "", kMasterPassword}) {
    auto other =
        sluice::OpenStore(group->url(), {.timeout = 100ms, .sentinel_password = sentinel_password});
    ASSERT_TRUE(other.ok()) << other.status().message();
    auto d = (*other)->Check({.scope = "api", .limit = &limit, .key = "other"});
    ASSERT_FALSE(d.ok()) << "sentinel password '" << sentinel_password << "'";
    EXPECT_EQ(d.status().code(), sluice::StatusCode::kUnavailable) << d.status().message();
    for (const char* secret : {kMasterPassword, kSentinelPassword, "wrong"}) {
      EXPECT_EQ(d.status().message().find(secret), std::string::npos) << d.status().message();
    }
  }
  // The master's password wrong: the sentinels answer, the master refuses the login.
  auto wrong_master = sluice::OpenStore(
      "redis+sentinel://:nope@127.0.0.1:" + std::to_string(group->sentinel_ports()[0]) + "/" +
          group->setup().master_name,
      {.timeout = 100ms, .sentinel_password = std::string(kSentinelPassword)});
  ASSERT_TRUE(wrong_master.ok());
  auto refused = (*wrong_master)->Check({.scope = "api", .limit = &limit, .key = "other"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), sluice::StatusCode::kUnavailable);
  EXPECT_EQ(group->EvalShaCalls(replica), 0);
}

// A connection that requires a master is used only once the server has said ROLE master: one to
// the replica never carries a call.
TEST(SentinelStore, AConnectionRequiringAMasterIsNeverUsedOnAReplica) {
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  for (const int port : {group->server(0).port(), group->server(1).port()}) {
    sluice::redis::ClientOptions options;
    options.port = port;
    options.password = kMasterPassword;
    options.require_master = true;
    options.connect_timeout = 200ms;
    options.timeout = 200ms;
    auto client = sluice::redis::Client::Create(options);
    ASSERT_TRUE(client.ok()) << client.status().message();
    // A read, which a replica would serve (and which replication never sends it).
    const std::string_view get[] = {"GET", "sluice:probe"};
    auto reply = (*client)->CommandSync(get);
    if (port == group->server(0).port()) {
      ASSERT_TRUE(reply.ok()) << reply.status().message();
      EXPECT_FALSE(reply->is_error()) << reply->str;
    } else {
      ASSERT_FALSE(reply.ok()) << "a call went to the replica";
      EXPECT_EQ(reply.status().code(), sluice::StatusCode::kUnavailable);
      EXPECT_FALSE((*client)->Connected().ok());
    }
  }
  EXPECT_EQ(group->Cli(group->server(1).port(), {"INFO", "commandstats"}).find("cmdstat_get"),
            std::string::npos)
      << "a GET reached the replica";
}

// The Redis user of docs/redis-acl.md with +role runs checks through the sentinels; without
// +role, no connection passes its ROLE check and no master is used.
TEST(SentinelStore, TheDocumentedUserNeedsRoleAsWell) {
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  const sluice::Limit limit = *sluice::Limit::Create(sluice::Algorithm::kGcra, 100, 1min);
  for (const bool with_role : {true, false}) {
    const std::string user = with_role ? "sluice-role" : "sluice-norole";
    for (const int port : {group->server(0).port(), group->server(1).port()}) {
      auto acl = sluice::testing::DocumentedAclSetUser(user, "app-pw", "sluice:", "");
      if (with_role) acl.push_back("+role");
      ASSERT_EQ(group->Cli(port, acl), "OK");
    }
    const std::string url = "redis+sentinel://" + user + ":app-pw@" +
                            group->url(false).substr(std::string("redis+sentinel://").size());
    auto store = sluice::OpenStore(
        url, {.timeout = 200ms, .sentinel_password = std::string(kSentinelPassword)});
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto d = (*store)->Check({.scope = "api", .limit = &limit, .key = "acl"});
    EXPECT_EQ(d.ok(), with_role) << user << ": " << (d.ok() ? "" : d.status().message());
  }
}

// A check through `store`, retried (each a fresh check) until one is decided by Redis or `within`
// passes; the last result.
sluice::Result<sluice::Decision> CheckUntilDecided(sluice::Store& store, const sluice::Limit& limit,
                                                   const std::string& key,
                                                   std::chrono::milliseconds within) {
  const auto until = Steady::now() + within;
  while (true) {
    auto d = store.Check({.scope = "api", .limit = &limit, .key = key});
    if (d.ok() || Steady::now() > until) return d;
    std::this_thread::sleep_for(20ms);
  }
}

// rediss+sentinel://: the sentinels and the master reached over TLS only (the URL names the
// sentinels' TLS ports; the sentinels name the master's), through a SENTINEL FAILOVER; a CA that
// did not sign the servers' certificates is refused with the cause.
TEST(SentinelTls, FindsTheMasterAndFollowsAFailoverOverTls) {
  auto ca = sluice::testing::CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const auto cert = ca->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  SentinelSetup setup = WithPasswords();
  setup.tls = {.cert_file = cert.cert_file, .key_file = cert.key_file, .ca_file = ca->ca_file()};
  auto group = RedisSentinel::Start(setup);
  ASSERT_NE(group, nullptr);
  ASSERT_TRUE(group->url().starts_with("rediss+sentinel://")) << group->url();
  const sluice::Limit limit = *sluice::Limit::Create(sluice::Algorithm::kFixedWindow, 1000, 1h);

  auto other_ca = sluice::testing::CertificateAuthority::Create("another CA");
  ASSERT_NE(other_ca, nullptr);
  auto untrusted = sluice::OpenStore(group->url(), {.timeout = 200ms,
                                                    .sentinel_password = kSentinelPassword,
                                                    .tls = {.ca_file = other_ca->ca_file()}});
  ASSERT_TRUE(untrusted.ok()) << untrusted.status().message();
  auto refused = (*untrusted)->Check({.scope = "api", .limit = &limit, .key = "tls"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), sluice::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("the server's certificate was refused"),
            std::string::npos)
      << refused.status().message();
  for (const char* secret : {kMasterPassword, kSentinelPassword}) {
    EXPECT_EQ(refused.status().message().find(secret), std::string::npos);
  }
  // Plain text to the TLS ports finds nothing.
  std::string plain = group->url();
  plain.replace(0, std::string("rediss").size(), "redis");
  auto cleartext =
      sluice::OpenStore(plain, {.timeout = 200ms, .sentinel_password = kSentinelPassword});
  ASSERT_TRUE(cleartext.ok());
  EXPECT_FALSE((*cleartext)->Check({.scope = "api", .limit = &limit, .key = "tls"}).ok());

  auto store = sluice::OpenStore(group->url(), {.timeout = 200ms,
                                                .sentinel_password = kSentinelPassword,
                                                .tls = {.ca_file = ca->ca_file()}});
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto d = CheckUntilDecided(**store, limit, "tls", 5s);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_GT(group->EvalShaCalls(group->DataPort(0)), 0);
  EXPECT_EQ(group->EvalShaCalls(group->DataPort(1)), 0) << "a script ran on the replica";

  ASSERT_TRUE(group->Failover());
  const auto new_master = group->WaitForNewMaster(group->DataPort(0), 30s);
  ASSERT_TRUE(new_master.has_value()) << "no new master within 30 s";
  ASSERT_EQ(*new_master, group->DataPort(1));
  const long before = group->EvalShaCalls(*new_master);
  const auto until = Steady::now() + 5s;
  while (group->EvalShaCalls(*new_master) == before && Steady::now() < until) {
    (void)(*store)->Check({.scope = "api", .limit = &limit, .key = "tls"});
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GT(group->EvalShaCalls(*new_master), before) << "the new master was not used over TLS";
  d = CheckUntilDecided(**store, limit, "tls", 2s);
  ASSERT_TRUE(d.ok()) << d.status().message();
}

// A master demoted behind the sentinels' back (REPLICAOF sent to it directly, the sentinels still
// naming it): the check that meets READONLY fails as an outage, no further script reaches it while
// it is a replica, and once the sentinels have failed it over, checks go to the new master.
TEST(SentinelStore, AMasterDemotedBehindTheSentinelsIsNotWrittenToAgain) {
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  const int master = group->server(0).port(), replica = group->server(1).port();
  auto store =
      sluice::OpenStore(group->url(), {.timeout = 200ms, .sentinel_password = kSentinelPassword});
  ASSERT_TRUE(store.ok()) << store.status().message();
  const sluice::Limit limit = *sluice::Limit::Create(sluice::Algorithm::kFixedWindow, 1000, 1h);
  ASSERT_TRUE(CheckUntilDecided(**store, limit, "demoted", 5s).ok());

  ASSERT_EQ(group->Cli(master, {"REPLICAOF", "127.0.0.1", std::to_string(replica)}), "OK");
  ASSERT_EQ(group->RoleOf(master), "slave");
  // Sequential checks while the sentinels still name it: the first meets the demoted master
  // (READONLY), and none is answered but as an outage.
  int refused = 0;
  long after_refusal = 0;
  for (int i = 0; i < 30; ++i) {
    auto d = (*store)->Check({.scope = "api", .limit = &limit, .key = "demoted"});
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), sluice::StatusCode::kUnavailable) << d.status().message();
      if (refused++ == 0) after_refusal = group->EvalShaCalls(master);
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(refused, 0) << "no check met the demoted master";
  ASSERT_EQ(group->MasterPort(0), master) << "the sentinels moved on during the checks";
  ASSERT_EQ(group->RoleOf(master), "slave");
  EXPECT_EQ(group->EvalShaCalls(master), after_refusal)
      << "scripts went on to a master demoted to a replica after it answered READONLY";
  // The sentinels take down-after + 20 s to judge a master that says it is a replica down:
  // SENTINEL FAILOVER, rather than waiting.
  ASSERT_TRUE(group->Failover());
  const auto new_master = group->WaitForNewMaster(master, 30s);
  ASSERT_TRUE(new_master.has_value()) << "the sentinels did not fail over within 30 s";
  auto d = CheckUntilDecided(**store, limit, "demoted", 3s);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_GT(group->EvalShaCalls(*new_master), 0);
}

// A user of the sentinels' ACL with only what sluice asks of them (docs/redis-acl.md): the
// master is found and a failover followed from its promotion on; a user of an older ACL, without
// the promotions' channel, follows it at +switch-master; without the SENTINEL subcommand the
// sentinels refuse, and the error says so.
TEST(SentinelStore, ASentinelAclUserWithTheDocumentedCommandsFollowsAFailover) {
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  for (size_t i = 0; i < group->sentinel_ports().size(); ++i) {
    ASSERT_EQ(group->SentinelCli(
                  i, {"ACL", "SETUSER", "sluice-sentinel", "reset", "on", ">sentinel-user-pw",
                      "+sentinel|get-master-addr-by-name", "+subscribe", "+ping", "&+switch-master",
                      "&+failover-state-wait-promotion"}),
              "OK");
    ASSERT_EQ(group->SentinelCli(i, {"ACL", "SETUSER", "sluice-switches", "reset", "on",
                                     ">sentinel-user-pw", "+sentinel|get-master-addr-by-name",
                                     "+subscribe", "+ping", "&+switch-master"}),
              "OK");
    ASSERT_EQ(
        group->SentinelCli(i, {"ACL", "SETUSER", "sluice-nosentinel", "reset", "on",
                               ">sentinel-user-pw", "+subscribe", "+ping", "&+switch-master"}),
        "OK");
  }
  auto options = sluice::redis::ParseRedisSentinelUrl(group->url());
  ASSERT_TRUE(options.ok());
  options->master.timeout = options->master.connect_timeout = 200ms;
  options->sentinel_password = "sentinel-user-pw";

  options->sentinel_user = "sluice-nosentinel";
  auto denied = sluice::redis::SentinelClient::Create({.sentinel = *options});
  ASSERT_TRUE(denied.ok());
  const std::string_view ping[] = {"PING"};
  auto no = (*denied)->CommandSync(ping);
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.status().message().find("NOPERM"), std::string::npos) << no.status().message();
  EXPECT_EQ(no.status().message().find("sentinel-user-pw"), std::string::npos);
  denied->reset();

  options->sentinel_user = "sluice-sentinel";
  auto client = sluice::redis::SentinelClient::Create({.sentinel = *options});
  ASSERT_TRUE(client.ok());
  options->sentinel_user = "sluice-switches";
  auto older = sluice::redis::SentinelClient::Create({.sentinel = *options});
  ASSERT_TRUE(older.ok());
  for (auto* c : {&*client, &*older}) {
    auto pong = (*c)->CommandSync(ping);
    ASSERT_TRUE(pong.ok()) << pong.status().message();
    EXPECT_EQ((*c)->sentinel_stats().master,
              "127.0.0.1:" + std::to_string(group->server(0).port()));
  }
  // Every subscription in place before the failover.
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(group->Failover());
  ASSERT_TRUE(group->WaitForNewMaster(group->server(0).port(), 30s).has_value());
  const auto until = Steady::now() + 5s;
  while (((*client)->sentinel_stats().announcements == 0 ||
          (*older)->sentinel_stats().announcements == 0) &&
         Steady::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GT((*client)->sentinel_stats().promotions, 0u) << "no promotion heard";
  EXPECT_EQ((*older)->sentinel_stats().promotions, 0u);
  for (auto* c : {&*client, &*older}) {
    EXPECT_GT((*c)->sentinel_stats().announcements, 0u) << "no +switch-master heard";
    EXPECT_EQ((*c)->sentinel_stats().master,
              "127.0.0.1:" + std::to_string(group->server(1).port()));
  }
}

// A failover that never completes: the replica the sentinels' leader promotes refuses REPLICAOF
// (its default user may not run it), so it stays a replica and the leader waits for it until the
// failover times out. The client follows the promotion by asking the replica for its ROLE on one
// kept link: the replica gets one connection from it, not a Client's connections on every
// attempt, and every call meanwhile goes to the old master, which is still the master.
TEST(SentinelStore, AFailoverThatNeverCompletesCostsThePromotedReplicaOneConnection) {
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  const int master = group->server(0).port(), replica = group->DataPort(1);
  ASSERT_EQ(group->Cli(replica, {"ACL", "SETUSER", "default", "-replicaof", "-slaveof"}), "OK");
  auto options = sluice::redis::ParseRedisSentinelUrl(group->url());
  ASSERT_TRUE(options.ok());
  options->master.timeout = options->master.connect_timeout = 1s;  // a loaded machine
  options->sentinel_password = kSentinelPassword;
  auto client = sluice::redis::SentinelClient::Create({.sentinel = *options});
  ASSERT_TRUE(client.ok()) << client.status().message();
  const std::string_view ping[] = {"PING"};
  auto pong = (*client)->CommandSync(ping);
  ASSERT_TRUE(pong.ok()) << pong.status().message();
  std::this_thread::sleep_for(300ms);  // every subscription in place

  const auto connections_received = [&] {
    const std::string info = group->Cli(replica, {"INFO", "stats"});
    const auto at = info.find("total_connections_received:");
    return at == std::string::npos ? -1L : std::atol(info.c_str() + at + 27);
  };
  const long before = connections_received();
  ASSERT_GE(before, 0);
  ASSERT_TRUE(group->Failover());
  const auto heard_until = Steady::now() + 10s;
  while ((*client)->sentinel_stats().promotions == 0 && Steady::now() < heard_until) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT((*client)->sentinel_stats().promotions, 0u) << "no promotion heard";

  int calls = 0;
  for (const auto until = Steady::now() + 2s; Steady::now() < until; ++calls) {
    auto reply = (*client)->CommandSync(ping);
    ASSERT_TRUE(reply.ok()) << "a call during the promotion: " << reply.status().message();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(calls, 10);
  // One of them is the redis-cli that asks.
  const long made = connections_received() - before - 1;
  EXPECT_LE(made, 2) << "connections to the replica while the client followed its promotion";
  ASSERT_EQ(group->RoleOf(replica), "slave") << "the replica was promoted after all";
  EXPECT_EQ((*client)->sentinel_stats().master, "127.0.0.1:" + std::to_string(master));
}

// A link over TLS whose server has dropped it: OpenSSL writes with write(2), which raises SIGPIPE
// once the peer has reset the connection; the link's writes are an error then, and the process
// (its SIGPIPE left to the default, which ends it) goes on. A sentinel restarted, or the replica
// being promoted, whose clients the sentinels kill, does that to a link.
TEST(SentinelLinkTls, AServerThatDroppedTheLinkIsAnErrorNotTheEndOfTheProcess) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL) << "the test needs SIGPIPE's default action";
  auto ca = sluice::testing::CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const auto cert = ca->Issue("localhost", {"DNS:localhost", "IP:127.0.0.1"});
  auto server = sluice::testing::RedisServer::StartTls(
      {.cert_file = cert.cert_file, .key_file = cert.key_file, .ca_file = ca->ca_file()});
  ASSERT_NE(server, nullptr);
  auto tls = sluice::redis::TlsContext::Create({.ca_file = ca->ca_file()});
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  auto link = sluice::redis::SentinelLink::Connect(
      "127.0.0.1:" + std::to_string(server->tls_port()), {.peer = "server", .tls = *tls}, 2s);
  ASSERT_TRUE(link.ok()) << link.status().message();
  const std::string_view ping[] = {"PING"};
  auto pong = (*link)->Call(ping, 2s);
  ASSERT_TRUE(pong.ok()) << pong.status().message();

  ASSERT_NE(server->Cli({"CLIENT", "KILL", "TYPE", "normal"}), "0");
  int failed = 0;
  for (int i = 0; i < 10; ++i) {
    if (!(*link)->Send(ping, 1s).ok()) ++failed;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(failed, 0) << "every write to the dropped link succeeded";
  auto after = (*link)->Call(ping, 1s);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), sluice::StatusCode::kUnavailable) << after.status().message();
}

// A config whose store URL is bad is refused at its line, and the service does not start.
TEST(SentinelConfig, ABadStoreUrlIsRefusedAtItsLine) {
  sluice::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  struct Case {
    std::string url;
    std::string says;
  };
  for (const Case& c : {Case{"redis+sentinel://127.0.0.1:26379,127.0.0.1:26380", "master's name"},
                        Case{"redis+sentinal://127.0.0.1:26379/m", "unknown store URL"},
                        Case{"redis+sentinel://:hunter2@127.0.0.1:0/m", "port"}}) {
    const std::string path = dir.File("bad.yaml");
    sluice::testing::WriteFile(
        path, "rules:\n  - {name: api, algorithm: gcra, limit: 3, period: 1m}\nstore:\n  url: \"" +
                  c.url + "\"\n");
    sluice::testing::Process serve({"serve", "--config", path, "--listen", "127.0.0.1:0"},
                                   dir.File("serve.log"));
    ASSERT_TRUE(serve.started());
    const auto status = serve.WaitExit(10s);
    ASSERT_TRUE(status.has_value()) << "started with a bad store URL: " << serve.Log();
    EXPECT_NE(*status, 0);
    const std::string log = serve.Log();
    EXPECT_NE(log.find(path + ":4: store.url:"), std::string::npos) << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << log;
    EXPECT_EQ(log.find("hunter2"), std::string::npos) << log;
  }
}

// And a SIGHUP with such a file keeps the running config serving.
TEST(SentinelConfig, ASighupWithABadStoreUrlKeepsTheOldConfig) {
  Service service("rules:\n  - {name: api, algorithm: gcra, limit: 100, period: 1m}\n");
  ASSERT_TRUE(service.up()) << service.process().Log();
  sluice::testing::WriteFile(service.config_path(),
                             "rules:\n  - {name: api, algorithm: gcra, limit: 100, period: 1m}\n"
                             "store:\n  url: \"redis+sentinel://:hunter2@127.0.0.1:26379\"\n");
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reload rejected")) << service.process().Log();
  const std::string log = service.process().Log();
  EXPECT_NE(log.find(service.config_path() + ":4: store.url:"), std::string::npos) << log;
  EXPECT_EQ(log.find("hunter2"), std::string::npos) << log;
  auto r = service.Client().Post("/v1/check", R"({"rule":"api","key":"k"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// The time the first +switch-master for the master was announced, as a client subscribed on
// every sentinel sees it, and what `sample` gave then.
class SwitchWatch {
 public:
  SwitchWatch(const std::vector<int>& sentinel_ports, const std::string& master_name,
              std::function<int64_t()> sample) {
    for (int port : sentinel_ports) {
      auto link = sluice::redis::SentinelLink::Connect("127.0.0.1:" + std::to_string(port),
                                                       {.password = kSentinelPassword}, 1s);
      if (!link.ok()) return;
      const std::string_view subscribe[] = {"SUBSCRIBE", "+switch-master"};
      if (!(*link)->Call(subscribe, 1s).ok()) return;
      links_.push_back(std::move(*link));
    }
    thread_ = std::thread([this, master_name, sample = std::move(sample)] {
      while (!stop_.load() && at_.load() == 0) {
        for (auto& link : links_) {
          auto next = link->Next(0ms);
          if (!next.ok() || !next->has_value()) continue;
          const auto& m = **next;
          if (m.elements.size() == 3 && m.elements[2].str.starts_with(master_name + " ")) {
            sampled_ = sample();
            at_ = Steady::now().time_since_epoch().count();
          }
        }
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  ~SwitchWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool subscribed() const { return thread_.joinable(); }
  std::optional<Steady::time_point> at() const {
    const int64_t at = at_.load();
    if (at == 0) return std::nullopt;
    return Steady::time_point(Steady::duration(at));
  }
  int64_t sampled() const { return sampled_.load(); }

 private:
  std::vector<std::unique_ptr<sluice::redis::SentinelLink>> links_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> at_{0}, sampled_{0};
  std::thread thread_;
};

constexpr auto kDeadline = 50ms;  // store.timeout_ms's default
// Every answer within its deadline + 10 ms. No wait of the client outlives the deadline: while no
// master is known a check fails at once, and a call to a master that has gone ends at its
// deadline. Answers later than the deadline came only with stalls of the machine: on runs where
// this process saw no stall over 10 ms, the slowest answer took 7-15 ms. The bound adds three
// times the worst stall a StallWatch saw in this process, as an answer crosses three processes
// (this client, `sluice serve` and Redis), each of which the machine can stall on its own.
constexpr auto kHttpMargin = 10ms;
constexpr int64_t kCountedLimit = 100'000'000;

// `counted` is a fixed window of an hour, whose count starts again at the top of each: waits past
// the next one when it is less than `needed` away, so that the count covers the whole run.
void WaitPastTheHourIfWithin(std::chrono::seconds needed) {
  const auto now = std::chrono::system_clock::now();
  const auto into = now.time_since_epoch() % std::chrono::hours(1);
  const auto left = std::chrono::hours(1) - into;
  if (left < needed) std::this_thread::sleep_for(left + 1s);
}

constexpr const char* kRules = R"(rules:
  - {name: counted, algorithm: fixed_window, limit: 100000000, period: 1h, on_error: fail_closed}
  - {name: open, algorithm: gcra, limit: 1000000, period: 1s, on_error: fail_open}
)";

// Two client threads per service, each on its own keep-alive connection, alternating a check of
// `counted` on one key and of `open` on many, 1 ms apart; every answer timed.
class HttpLoad {
 public:
  explicit HttpLoad(const std::vector<Service*>& services) {
    for (size_t s = 0; s < services.size(); ++s) {
      for (int t = 0; t < 2; ++t) {
        threads_.emplace_back([this, service = services[s], t] {
          httplib::Client client = service->Client();
          for (int i = 0; !stop_.load() && i < 10'000'000; ++i) {
            const bool counted = i % 2 == 0;
            const std::string body = counted ? R"({"rule":"counted","key":"one"})"
                                             : R"({"rule":"open","key":"k)" +
                                                   std::to_string((t * 7919 + i) % 500) + R"("})";
            const auto start = Steady::now();
            auto r = client.Post("/v1/check", body, "application/json");
            const auto took = Steady::now() - start;
            RaiseTo(max_us_, Micros(took));
            {
              std::lock_guard lock(mu_);
              took_us_.push_back(Micros(took));
            }
            if (!faulted_.load()) RaiseTo(max_before_us_, Micros(took));
            if (took > kDeadline) ++over_deadline_;
            if (took > kDeadline + kHttpMargin) ++late_;
            json d = r && r->status == 200 ? json::parse(r->body, nullptr, false) : json();
            if (r && r->status == 503 && r->body.find("overloaded") != std::string::npos) {
              ++shed_;
            } else if (!d.is_object() || !d.contains("source")) {
              if (errors_++ == 0) {
                std::lock_guard lock(mu_);
                first_error_ = !r ? "no answer: " + httplib::to_string(r.error())
                                  : std::to_string(r->status) + " " + r->body;
              }
            } else if (d["source"] == "store") {
              ++from_store_;
              if (counted && d["allowed"] == true) ++counted_admitted_;
            } else {
              ++degraded_;
            }
            std::this_thread::sleep_for(1ms);
          }
        });
      }
    }
  }
  ~HttpLoad() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // From now on, answers are timed as after the fault.
  void Faulted() { faulted_ = true; }
  int64_t max_us() const { return max_us_.load(); }
  int64_t answers() const {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(took_us_.size());
  }
  // Answers that took longer than `bound`.
  int64_t LaterThan(std::chrono::microseconds bound) const {
    std::lock_guard lock(mu_);
    return std::count_if(took_us_.begin(), took_us_.end(),
                         [&](int64_t us) { return us > bound.count(); });
  }
  int64_t max_before_us() const { return max_before_us_.load(); }
  int64_t errors() const { return errors_.load(); }
  // Answered 503 by a service that found its own queue to Redis too slow (overloaded).
  int64_t shed() const { return shed_.load(); }
  std::string first_error() const {
    std::lock_guard lock(mu_);
    return first_error_;
  }
  // Answers later than the deadline plus the HTTP margin (the machine's stalls not added).
  int64_t late() const { return late_.load(); }
  int64_t over_deadline() const { return over_deadline_.load(); }
  int64_t degraded() const { return degraded_.load(); }
  int64_t from_store() const { return from_store_.load(); }
  int64_t counted_admitted() const { return counted_admitted_.load(); }

 private:
  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::string first_error_;
  std::vector<int64_t> took_us_;
  std::atomic<bool> stop_{false}, faulted_{false};
  std::atomic<int64_t> max_us_{0}, max_before_us_{0}, errors_{0}, degraded_{0}, from_store_{0},
      counted_admitted_{0}, late_{0}, over_deadline_{0}, shed_{0};
};

// What a poller saw of the two data servers every 5 ms, on a connection of its own to each:
// whether a script ran on a server while it was a replica, and when the one that started as the
// replica first ran one.
class ReplicaWatch {
 public:
  explicit ReplicaWatch(RedisSentinel& group) {
    thread_ = std::thread([this, &group] {
      const int ports[2] = {group.server(0).port(), group.server(1).port()};
      std::unique_ptr<sluice::redis::SentinelLink> links[2];
      // A reply of the server, or nullopt (it is down, or the link broke: made again next time).
      const auto ask = [&](int s, std::string_view word,
                           std::string_view arg) -> std::optional<sluice::redis::Reply> {
        if (links[s] == nullptr) {
          auto link = sluice::redis::SentinelLink::Connect("127.0.0.1:" + std::to_string(ports[s]),
                                                           {.password = kMasterPassword}, 100ms);
          if (!link.ok()) return std::nullopt;
          links[s] = std::move(*link);
        }
        std::vector<std::string_view> argv = {word};
        if (!arg.empty()) argv.push_back(arg);
        auto reply = links[s]->Call(argv, 500ms);
        if (!reply.ok() || reply->is_error()) {
          links[s].reset();
          return std::nullopt;
        }
        return std::move(*reply);
      };
      long demoted_count[2] = {-1, -1};
      while (!stop_.load()) {
        for (int s = 0; s < 2; ++s) {
          // The count, then the role: a count read while the role still says replica was made
          // on a replica.
          const auto info = ask(s, "INFO", "commandstats");
          const auto role = ask(s, "ROLE", "");
          if (!info || !role || role->elements.empty()) continue;
          const long calls = sluice::testing::EvalShaCallsIn(info->str);
          const std::string& name = role->elements[0].str;
          if (s == 1 && name == "master" && calls > 0 && first_use_.load() == 0) {
            first_use_ = Steady::now().time_since_epoch().count();
          }
          if (name != "slave") continue;
          if (demoted_count[s] < 0) demoted_count[s] = calls;
          if (calls > demoted_count[s]) ++violations_;
        }
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~ReplicaWatch() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int violations() const { return violations_.load(); }
  std::optional<Steady::time_point> first_use() const {
    const int64_t at = first_use_.load();
    if (at == 0) return std::nullopt;
    return Steady::time_point(Steady::duration(at));
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> violations_{0};
  std::atomic<int64_t> first_use_{0};
  std::thread thread_;
};

enum class Fault { kSentinelFailover, kKillMaster };

class SentinelFailover : public ::testing::TestWithParam<Fault> {};

TEST_P(SentinelFailover, TwoServicesFollowTheNewMasterWithinTheirDeadlines) {
  const Fault fault = GetParam();
  const char* fault_name = fault == Fault::kSentinelFailover ? "SENTINEL FAILOVER" : "kill -9";
  auto group = RedisSentinel::Start(WithPasswords());
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(setenv("SLUICE_TEST_SENTINEL_PASSWORD", kSentinelPassword, 1), 0);
  const std::string fields = "sentinel_password_env: SLUICE_TEST_SENTINEL_PASSWORD";
  Service a(kRules, group->url(), fields), b(kRules, group->url(), fields);
  ASSERT_TRUE(a.up()) << a.process().Log();
  ASSERT_TRUE(b.up()) << b.process().Log();
  const int old_master = group->server(0).port();
  WaitPastTheHourIfWithin(60s);

  sluice::testing::StallWatch stalls;
  ReplicaWatch replicas(*group);
  HttpLoad load({&a, &b});
  std::this_thread::sleep_for(1s);
  ASSERT_GT(load.from_store(), 0) << "no decision from Redis before the fault";
  SwitchWatch announcement(group->sentinel_ports(), group->setup().master_name,
                           [&load] { return load.counted_admitted(); });
  ASSERT_TRUE(announcement.subscribed());

  load.Faulted();
  const auto fault_at = Steady::now();
  const int64_t admitted_at_fault = load.counted_admitted();
  if (fault == Fault::kSentinelFailover) {
    ASSERT_TRUE(group->Failover());
  } else {
    group->server(0).Kill();
  }
  const auto new_master = group->WaitForNewMaster(old_master, 30s);
  ASSERT_TRUE(new_master.has_value()) << "no new master within 30 s";
  EXPECT_EQ(*new_master, group->server(1).port());
  const auto used_by = Steady::now() + 5s;
  while (!replicas.first_use() && Steady::now() < used_by) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(1500ms);
  const int64_t store_before_stop = load.from_store();
  load.Stop();
  replicas.Stop();

  ASSERT_TRUE(announcement.at().has_value()) << "no +switch-master seen";
  ASSERT_TRUE(replicas.first_use().has_value()) << "the new master never ran a check";
  const auto switch_delay = *replicas.first_use() - *announcement.at();

  // What the new master counted of `counted`, against what the services reported admitted.
  // One more check, decided by Redis (a service's breaker may still be letting its first probe
  // through; a refusal by fail_closed consumes nothing).
  httplib::Client client = a.Client();
  json d;
  for (int attempt = 0; attempt < 50 && !(d.is_object() && d["source"] == "store"); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(100ms);
    auto last = client.Post("/v1/check", R"({"rule":"counted","key":"one"})", "application/json");
    ASSERT_TRUE(last && last->status == 200);
    d = json::parse(last->body);
  }
  ASSERT_EQ(d["source"], "store") << d.dump();
  const int64_t counted_by_master = kCountedLimit - d["remaining"].get<int64_t>() - 1;
  const int64_t lost = load.counted_admitted() - counted_by_master;
  // Admissions of `counted` between the fault and the first +switch-master.
  const int64_t until_announced = announcement.sampled() - admitted_at_fault;

  const auto bound = kDeadline + kHttpMargin + 3 * stalls.worst();
  const int64_t beyond_bound = load.LaterThan(bound);
  std::printf(
      "[%s] +switch-master %.0f ms after the fault; new master's first script %.1f ms after it "
      "(before it when negative; sampled every 5 ms); slowest answer %.1f ms (%.1f ms before the "
      "fault; bound %.1f ms, "
      "stall %.1f ms), of %lld answers %lld later than the deadline, %lld later than %lld ms, "
      "%lld beyond the bound; %lld "
      "decisions from Redis, %lld by failure policy, %lld shed as overloaded, %lld errors; "
      "admissions of `counted` "
      "reported %lld (%lld between the fault and the announcement), counted by the new master "
      "%lld: %lld lost\n",
      fault_name, Millis(*announcement.at() - fault_at), Millis(switch_delay),
      load.max_us() / 1000.0, load.max_before_us() / 1000.0, Millis(bound),
      stalls.worst().count() / 1000.0, static_cast<long long>(load.answers()),
      static_cast<long long>(load.over_deadline()), static_cast<long long>(load.late()),
      static_cast<long long>(std::chrono::milliseconds(kDeadline + kHttpMargin).count()),
      static_cast<long long>(beyond_bound), static_cast<long long>(store_before_stop),
      static_cast<long long>(load.degraded()), static_cast<long long>(load.shed()),
      static_cast<long long>(load.errors()), static_cast<long long>(load.counted_admitted()),
      static_cast<long long>(until_announced), static_cast<long long>(counted_by_master),
      static_cast<long long>(lost));

  // Answers shed as overloaded (a service's check waited in its own queue to Redis for half its
  // deadline, when the machine stalled that service) are answers within the bound all the same;
  // they are printed, not failed: the stall that causes them is the service's, unseen here.
  EXPECT_EQ(load.errors(), 0) << "answers that were not decisions, the first: "
                              << load.first_error();
  // The services' own stalls are unseen here: at load 10 on 2 cores, an answer took 175 ms before
  // any fault while this process saw 27 ms. A few answers a thousand may be stalled past the bound
  // that way; a client that waited (for a master gone, for the sentinels) would make thousands
  // late: every check of the gap.
  EXPECT_LE(beyond_bound, std::max<int64_t>(3, load.answers() / 1000))
      << "answers later than their deadline + 10 ms + 3 x the worst stall";
  EXPECT_LE(switch_delay, 1s) << "the new master was used late";
  EXPECT_EQ(replicas.violations(), 0) << "a script ran on a replica";
  EXPECT_GE(lost, -load.degraded()) << "more counted than admitted or failed";
  if (fault == Fault::kSentinelFailover) {
    // The old master admits until the services leave it, and what it admits after the promotion
    // is lost: following +switch-master alone lost most of what was admitted before it (1 277 of
    // 1 556 in a run). The services follow the promotion itself, a second earlier.
    EXPECT_LE(lost, until_announced / 2)
        << "the services kept the old master after the promotion began";
  }
  EXPECT_EQ(a.process().Stop(10s), 0) << a.process().Log();
  EXPECT_EQ(b.process().Stop(10s), 0) << b.process().Log();
}

INSTANTIATE_TEST_SUITE_P(Each, SentinelFailover,
                         ::testing::Values(Fault::kSentinelFailover, Fault::kKillMaster),
                         [](const auto& info) {
                           return info.param == Fault::kSentinelFailover ? "SentinelFailover"
                                                                         : "KillMaster";
                         });

}  // namespace
