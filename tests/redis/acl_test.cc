// The Redis user of docs/redis-acl.md, on a real redis-server and on every node of a real Redis
// Cluster: every operation sluice has runs through a user that has exactly the documented rights
// (under the default key prefix and under another), each succeeds and Redis logs no refusal; and
// without any one of the documented commands, something fails, so the list holds only what the
// code sends. The rights are read from the doc itself, so the two cannot drift apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster_slots.h"
#include "sluice/acquirer.h"
#include "sluice/clock.h"
#include "sluice/leasing_store.h"
#include "sluice/limiter.h"
#include "sluice/redis_store.h"
#include "sluice/timers.h"
#include "support/redis_acl.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kUser[] = "sluice";
constexpr char kPassword[] = "acl-test-password";

std::vector<std::string> SetUserCommand(const std::string& key_prefix,
                                        const std::string& drop = "") {
  return DocumentedAclSetUser(kUser, kPassword, key_prefix, drop);
}

// "redis://host..." or "redis+cluster://host..." with the user's credentials.
std::string WithCredentials(const std::string& url) {
  const auto rest = url.find("://") + 3;
  return url.substr(0, rest) + kUser + ":" + kPassword + "@" + url.substr(rest);
}

TEST(DocumentedAcl, IsReadFromTheDoc) {
  const std::vector<std::string> rules = DocumentedAclRules();
  ASSERT_FALSE(rules.empty()) << "no 'ACL SETUSER sluice ...' line in docs/redis-acl.md";
  for (const char* expected : {"on", ">PASSWORD", "resetkeys", "~sluice:*", "-@all"}) {
    EXPECT_NE(std::find(rules.begin(), rules.end(), expected), rules.end()) << expected;
  }
}

// Timers on a thread of their own, for the leases and the acquires.
class TimerThread {
 public:
  TimerThread() : timers_(io_), thread_([this] { io_.run(); }) {}
  ~TimerThread() {
    work_.reset();
    thread_.join();
  }
  Timers& timers() { return timers_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  AsioTimers timers_;
  std::thread thread_;
};

// What failed, one line each; empty when everything succeeded.
using Failures = std::vector<std::string>;

void Expect(Failures& failures, const std::string& what, const Status& status) {
  if (!status.ok()) failures.push_back(what + ": " + status.ToString());
}

template <typename T>
void Expect(Failures& failures, const std::string& what, const Result<T>& result) {
  Expect(failures, what, result.status());
}

// Every operation a RedisStore has, on keys of `scope`: the checks of the six algorithms (one
// at a time, in a batch, in flight together and so coalesced, peeks, reservations), a
// sliding_log's dead entries and its entries of one instant (through a store opened with
// `options` and a caller's clock), a log an earlier version wrote (`write_old_log` puts one in
// Redis as an administrator), CheckAll, Reset, GiveBack, leases and their give-back, acquires,
// and the readiness probe.
Failures RunEveryOperation(RedisStore& store, const RedisStoreOptions& options,
                           const std::string& scope,
                           const std::function<void(const std::string&)>& write_old_log) {
  Failures failures;
  const Algorithm algorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                  Algorithm::kSlidingLog,  Algorithm::kTokenBucket,
                                  Algorithm::kLeakyBucket, Algorithm::kGcra};
  for (Algorithm algorithm : algorithms) {
    const std::string name = std::string(AlgorithmName(algorithm));
    const Limit limit = *Limit::Create(algorithm, 5, 100ms);
    const auto request = [&](std::string_view key, int64_t cost = 1) {
      return CheckRequest{.scope = scope, .limit = &limit, .key = key, .cost = cost};
    };
    Expect(failures, name + " check", store.Check(request("one")));
    Expect(failures, name + " peek", store.Check(request("one", 0)));
    const CheckRequest batch[] = {request("one"), request("one"), request("two"), request("three")};
    for (const auto& decision : store.CheckBatch(batch))
      Expect(failures, name + " batch", decision);
    std::vector<std::promise<Result<Decision>>> answers(64);  // coalesced: MGET
    for (auto& answer : answers) {
      store.CheckAsync(request("four"), [&answer](Result<Decision> d) { answer.set_value(d); });
    }
    for (auto& answer : answers) Expect(failures, name + " async", answer.get_future().get());
    std::this_thread::sleep_for(150ms);  // the entries above are dead
    Expect(failures, name + " check after the period", store.Check(request("one", 5)));
    if (IsMeter(algorithm)) {
      CheckRequest booking = request("one", 3);
      booking.max_delay = 1s;
      Expect(failures, name + " reservation", store.Check(booking));
      Expect(failures, name + " give-back", store.GiveBack(scope, limit, "two", 1));
    }
    Expect(failures, name + " reset", store.Reset(scope, "one"));
  }

  const Limit log = *Limit::Create(Algorithm::kSlidingLog, 10, 10s);
  ManualClock instant(std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()));
  RedisStoreOptions at_an_instant = options;
  at_an_instant.clock = &instant;
  if (auto clocked = RedisStore::Create(at_an_instant); clocked.ok()) {
    for (int i = 0; i < 2; ++i) {
      Expect(failures, "a log's second entry at one instant",
             (*clocked)->Check({.scope = scope, .limit = &log, .key = "instant"}));
    }
  } else {
    Expect(failures, "a store on a caller's clock", clocked.status());
  }
  write_old_log("old-log");
  Expect(failures, "a log an earlier version wrote",
         store.Check({.scope = scope, .limit = &log, .key = "old-log"}));

  const Limit per_second = *Limit::Create(Algorithm::kGcra, 10, 1s);
  const Limit per_minute = *Limit::Create(Algorithm::kSlidingLog, 100, 60s);
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) keys.push_back("all-" + std::to_string(i));
  std::vector<CheckRequest> all;
  for (const std::string& key : keys) {
    all.push_back({.scope = scope, .limit = &per_second, .key = key});
  }
  const std::string minute_scope = scope + "-minute";
  all.push_back({.scope = minute_scope, .limit = &per_minute, .key = keys[0]});
  Expect(failures, "check-all", store.CheckAll(all));

  std::promise<Result<Decision>> probe;
  store.ProbeAsync([&probe](Result<Decision> d) { probe.set_value(d); });
  Expect(failures, "readiness probe", probe.get_future().get());

  TimerThread timers;
  {
    LeasingStore leasing(store, timers.timers(), {.store_timeout = 1s});
    for (Algorithm algorithm : {Algorithm::kFixedWindow, Algorithm::kGcra}) {
      const Limit limit = *Limit::Create(algorithm, 100, 10s);
      const CheckRequest leased{.scope = scope,
                                .limit = &limit,
                                .key = "leased",
                                .lease = {.units = 10, .lifetime = 50ms}};
      for (int i = 0; i < 3; ++i) {
        Expect(failures, std::string(AlgorithmName(algorithm)) + " leased check",
               leasing.Check(leased));
      }
    }
    std::this_thread::sleep_for(150ms);  // the leases end, the gcra's gives back
  }

  Limiter shaped(store, scope + "-acquire", *Limit::Create(Algorithm::kGcra, 2, 100ms));
  Acquirer acquirer(shaped, timers.timers());
  for (int i = 0; i < 4; ++i) {
    auto acquired = acquirer.Acquire("client", 1, 1s);
    Expect(failures, "acquire", acquired);
    if (acquired.ok() && acquired->outcome != AcquireOutcome::kAdmitted) {
      failures.push_back(std::string("acquire: ") + AcquireOutcomeName(acquired->outcome));
    }
  }
  return failures;
}

// A "time:cost" log, the form an earlier version wrote, at `key` and its total at `aux`.
std::vector<std::vector<std::string>> OldLogCommands(const std::vector<std::string>& names) {
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const std::string at = std::to_string(now_us - 1'000'000);
  return {{"ZADD", names[0], at, at + ":2"},
          {"PEXPIRE", names[0], "600000"},
          {"SET", names[1], "2", "PX", "600000"}};
}

class AclOnOneRedis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = RedisServer::Start().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_EQ(server_->Cli({"FLUSHALL"}), "OK");
    ASSERT_EQ(server_->Cli({"ACL", "LOG", "RESET"}), "OK");
  }

  // The store as the user with the documented rights (less `drop`), and everything run through
  // it; what failed and what Redis refused.
  Failures RunAsUser(const std::string& key_prefix, const std::string& drop = "") {
    if (server_->Cli(SetUserCommand(key_prefix, drop)) != "OK") return {"ACL SETUSER failed"};
    const RedisStoreOptions options{.url = WithCredentials(server_->url()),
                                    .timeout = 1s,
                                    .connect_timeout = 1s,
                                    .key_prefix = key_prefix};
    auto store = RedisStore::Create(options);
    if (!store.ok()) return {"create: " + store.status().ToString()};
    // A script cache flushed under the store: each script is loaded again (SCRIPT LOAD).
    if (server_->Cli({"SCRIPT", "FLUSH"}) != "OK") return {"SCRIPT FLUSH failed"};
    Failures failures = RunEveryOperation(**store, options, "acl", [&](const std::string& key) {
      for (const auto& command : OldLogCommands((*store)->KeysOf("acl", key))) {
        server_->Cli(command);
      }
    });
    if (const std::string refused = server_->Cli({"ACL", "LOG"}); !refused.empty()) {
      failures.push_back("ACL LOG: " + refused);
    }
    return failures;
  }

  static RedisServer* server_;
};

RedisServer* AclOnOneRedis::server_ = nullptr;

std::string Lines(const Failures& failures) {
  std::string text;
  for (const std::string& failure : failures) text += failure + "\n";
  return text;
}

TEST_F(AclOnOneRedis, EveryOperationRunsAsTheDocumentedUser) {
  const Failures failures = RunAsUser("sluice:");
  EXPECT_TRUE(failures.empty()) << Lines(failures);
  // Every key it left is in its namespace.
  const std::string keys = server_->Cli({"KEYS", "*"});
  std::istringstream lines(keys);
  for (std::string key; std::getline(lines, key);) {
    EXPECT_TRUE(key.starts_with("sluice:")) << key;
  }
}

TEST_F(AclOnOneRedis, TheKeyPatternFollowsTheKeyPrefix) {
  const Failures failures = RunAsUser("billing:");
  EXPECT_TRUE(failures.empty()) << Lines(failures);
}

TEST_F(AclOnOneRedis, ADatabaseOtherThanZeroNeedsSelectToo) {
  ASSERT_EQ(server_->Cli(SetUserCommand("sluice:")), "OK");
  const Limit limit = *Limit::Create(Algorithm::kGcra, 5, 1s);
  const CheckRequest request{.scope = "acl", .limit = &limit, .key = "db"};
  const RedisStoreOptions options{
      .url = WithCredentials(server_->url()) + "/2", .timeout = 1s, .connect_timeout = 1s};
  auto without = RedisStore::Create(options);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_FALSE((*without)->Check(request).ok()) << "SELECT was allowed";
  ASSERT_EQ(server_->Cli({"ACL", "SETUSER", kUser, "+select"}), "OK");
  auto with = RedisStore::Create(options);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_TRUE((*with)->Check(request).ok());
}

// Each command of the list is needed: without it, an operation fails and Redis logs the refusal.
// (The Cluster's own commands are taken out on a cluster, below.)
TEST_F(AclOnOneRedis, EachDocumentedCommandIsUsed) {
  for (const std::string& rule : DocumentedAclRules()) {
    if (!rule.starts_with('+') || rule == "+cluster|slots" || rule == "+asking") continue;
    SCOPED_TRACE(rule);
    ASSERT_EQ(server_->Cli({"FLUSHALL"}), "OK");
    ASSERT_EQ(server_->Cli({"ACL", "LOG", "RESET"}), "OK");
    const Failures failures = RunAsUser("sluice:", rule);
    EXPECT_FALSE(failures.empty()) << "nothing needed " << rule;
    EXPECT_NE(Lines(failures).find("\nobject\n" + rule.substr(1) + "\n"), std::string::npos)
        << "Redis did not log a refusal of " << rule << ":\n"
        << Lines(failures);
  }
}

// A Redis Cluster of 3 masters, the user created on every node.
class AclOnACluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = RedisCluster::Start(3, 0).release(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  bool SetUser(const std::string& drop = "") {
    for (int port : cluster_->ports()) {
      if (cluster_->Cli(port, SetUserCommand("sluice:", drop)) != "OK") return false;
      if (cluster_->Cli(port, {"ACL", "LOG", "RESET"}) != "OK") return false;
    }
    return true;
  }
  std::string Refusals() const {
    std::string refusals;
    for (int port : cluster_->ports()) refusals += cluster_->Cli(port, {"ACL", "LOG"});
    return refusals;
  }
  static RedisStoreOptions Options() {
    return {.url = WithCredentials(cluster_->url()), .timeout = 1s, .connect_timeout = 1s};
  }
  Result<std::unique_ptr<RedisStore>> Open() const { return RedisStore::Create(Options()); }
  // A check of a key whose slot is migrating and not yet on its source: ASK, then ASKING and the
  // check on the target; then, the slot moved, MOVED and the slot map read again.
  void CheckThroughAMigration(RedisStore& store, const std::string& key, Failures& failures) {
    const Limit limit = *Limit::Create(Algorithm::kGcra, 5, 1s);
    const CheckRequest request{.scope = "acl", .limit = &limit, .key = key};
    const int slot = redis::KeySlot(store.KeysOf("acl", key)[0]);
    const int from = cluster_->MasterOfSlot(slot);
    const auto masters = cluster_->MasterPorts();
    const int to = masters[0] != from ? masters[0] : masters[1];
    ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to));
    Expect(failures, "check during a migration", store.Check(request));
    ASSERT_TRUE(cluster_->MigrateSlotKeys(slot));
    ASSERT_TRUE(cluster_->EndSlotMigration(slot));
    Expect(failures, "check after a migration", store.Check(request));
  }

  static RedisCluster* cluster_;
};

RedisCluster* AclOnACluster::cluster_ = nullptr;

TEST_F(AclOnACluster, EveryOperationRunsAsTheDocumentedUser) {
  ASSERT_TRUE(SetUser());
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Failures failures = RunEveryOperation(**store, Options(), "acl", [&](const std::string& key) {
    const auto names = (*store)->KeysOf("acl", key);
    const int port = cluster_->MasterOfSlot(redis::KeySlot(names[0]));
    for (const auto& command : OldLogCommands(names)) cluster_->Cli(port, command);
  });
  CheckThroughAMigration(**store, "migrating-1", failures);
  EXPECT_TRUE(failures.empty()) << Lines(failures);
  EXPECT_EQ(Refusals(), "");
}

TEST_F(AclOnACluster, WithoutClusterSlotsTheSlotMapIsNotLearned) {
  ASSERT_TRUE(SetUser("+cluster|slots"));
  auto store = Open();
  if (store.ok()) {
    const Limit limit = *Limit::Create(Algorithm::kGcra, 5, 1s);
    EXPECT_FALSE((*store)->Check({.scope = "acl", .limit = &limit, .key = "k"}).ok());
  }
  EXPECT_NE(Refusals().find("\nobject\ncluster|slots\n"), std::string::npos) << Refusals();
}

TEST_F(AclOnACluster, WithoutAskingAMigratingSlotIsNotFollowed) {
  ASSERT_TRUE(SetUser("+asking"));
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Failures failures;
  CheckThroughAMigration(**store, "migrating-2", failures);
  EXPECT_FALSE(failures.empty());
  EXPECT_NE(Refusals().find("\nobject\nasking\n"), std::string::npos) << Refusals();
}

}  // namespace
}  // namespace sluice::testing
