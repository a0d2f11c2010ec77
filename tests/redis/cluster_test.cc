// Redis Cluster: slots, URLs, and ClusterClient and RedisStore on real clusters of
// redis-server processes (3 masters, 3 replicas) on loopback. The conformance and exactness
// suites of the store run on the shared cluster too (this binary links them with
// cluster_target.cc). ClusterUnderChange moves slots and fails masters over while checks run.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/await.h"
#include "batch_test_support.h"
#include "cluster_target.h"
#include "redis/cluster_client.h"
#include "redis/cluster_slots.h"
#include "redis/scripts.h"
#include "redis/url.h"
#include "sluice/redis_store.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using redis::ClusterClient;
using redis::KeySlot;

// Values from `redis-cli CLUSTER KEYSLOT` on Redis 7.0.
TEST(KeySlot, MatchesRedis) {
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("123456789"), 12739);
  EXPECT_EQ(KeySlot(""), 0);
  EXPECT_EQ(KeySlot("{user1000}.following"), 3443);
  EXPECT_EQ(KeySlot("sluice:gcra:{user:42}"), 15880);
  EXPECT_EQ(KeySlot("a{}b"), 13694);     // an empty tag: the whole key
  EXPECT_EQ(KeySlot("{}{x}"), 3257);     // the first '{' decides, and its tag is empty
  EXPECT_EQ(KeySlot("x{y}{z}"), 12222);  // the first tag only
  EXPECT_EQ(KeySlot("a{b"), 13340);      // no closing brace: the whole key
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
}

TEST(KeySlot, AgreesWithALiveCluster) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  std::mt19937 rng(6);
  const std::string alphabet = "ab{}:%x";
  for (int i = 0; i < 40; ++i) {
    std::string key;
    for (size_t n = rng() % 12; n > 0; --n) key += alphabet[rng() % alphabet.size()];
    EXPECT_EQ(std::to_string(KeySlot(key)),
              cluster->Cli(cluster->ports().front(), {"CLUSTER", "KEYSLOT", key}))
        << "key '" << key << "'";
  }
}

TEST(ParseRedisClusterUrl, SeedsAndCredentials) {
  auto plain = redis::ParseRedisClusterUrl("redis+cluster://10.0.0.1:7000,10.0.0.2:7001,cache");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->seeds,
            (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001", "cache:6379"}));
  EXPECT_EQ(plain->node.password, "");

  auto secret = redis::ParseRedisClusterUrl("redis+cluster://alice:s3:cr@t@h1:1,h2:2");
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(secret->node.user, "alice");
  EXPECT_EQ(secret->node.password, "s3:cr@t");
  EXPECT_EQ(secret->seeds, (std::vector<std::string>{"h1:1", "h2:2"}));
}

TEST(ParseRedisClusterUrl, RejectsWithTheReasonAndNoPassword) {
  for (const char* bad :
       {"redis://h:1", "redis+cluster://", "redis+cluster://h:1,", "redis+cluster://h:1,:2",
        "redis+cluster://h:x", "redis+cluster://h:1/2", "redis+cluster://:hunter2@h:0"}) {
    auto r = redis::ParseRedisClusterUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("redis+cluster://[user:password@]"), std::string::npos)
        << r.status().message();
    EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos) << r.status().message();
  }
}

std::unique_ptr<ClusterClient> ConnectCluster(const RedisCluster& cluster,
                                              Duration refresh_interval) {
  auto options = redis::ParseRedisClusterUrl(cluster.url());
  EXPECT_TRUE(options.ok()) << options.status().ToString();
  if (!options.ok()) return nullptr;
  options->node.timeout = 5s;
  options->node.connect_timeout = 5s;
  options->refresh_interval = refresh_interval;
  auto client = ClusterClient::Create(std::move(*options));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

class ClusterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = SharedCluster();
    ASSERT_NE(cluster_, nullptr);
    client_ = ConnectCluster(*cluster_, 1h);  // no refresh adds its own commands to the counts
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(client_->Connected().ok());
    static std::atomic<int> tests{0};
    prefix_ = "cc" + std::to_string(tests.fetch_add(1)) + ":";
  }

  void TearDown() override {
    // Whatever a test wrote is deleted, on whichever master holds it.
    for (int port : cluster_->MasterPorts()) {
      cluster_->Cli(port, {"EVAL",
                           "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                           "redis.call('DEL', k) end",
                           "0", prefix_ + "*"});
    }
  }

  RedisCluster* cluster_ = nullptr;
  std::unique_ptr<ClusterClient> client_;
  std::string prefix_;
};

TEST_F(ClusterClientTest, KeysGoToTheMasterOfTheirSlot) {
  std::map<int, std::unique_ptr<redis::Client>> nodes;
  for (int port : cluster_->MasterPorts()) nodes[port] = Inspector(port);  // to see where keys are
  ASSERT_EQ(nodes.size(), 3u);
  std::map<int, int> keys_on;
  for (int i = 0; i < 60; ++i) {
    const std::string key = prefix_ + std::to_string(i);
    const std::string_view set[] = {"SET", key, "v"};
    auto r = client_->CommandSync(set);
    ASSERT_TRUE(r.ok() && !r->is_error()) << (r.ok() ? r->str : r.status().ToString());
    const int master = cluster_->MasterOfSlot(KeySlot(key));
    EXPECT_EQ(client_->MasterOfForTesting(KeySlot(key)), "127.0.0.1:" + std::to_string(master));
    const std::string_view exists[] = {"EXISTS", key};
    for (auto& [port, node] : nodes) {
      EXPECT_EQ(node->CommandSync(exists)->integer, port == master ? 1 : 0) << key << " " << port;
    }
    ++keys_on[master];
  }
  EXPECT_EQ(keys_on.size(), 3u) << "keys spread over every master";
  EXPECT_EQ(client_->cluster_stats_for_testing().moved, 0u);
}

// The threads of this process (Linux: /proc/self/status).
int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

// The node clients of the 3 masters share the I/O threads: a client with io_threads = 2 adds
// those 2, each with the resolver thread Asio starts for its io_context, and its refresh thread;
// not 2 of each per master.
TEST_F(ClusterClientTest, NodeClientsShareTheIoThreads) {
  auto options = redis::ParseRedisClusterUrl(cluster_->url());
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  options->node.io_threads = 2;
  options->node.connect_timeout = 5s;
  const int before = ThreadsOfThisProcess();
  auto client = ClusterClient::Create(*options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->cluster_stats_for_testing().nodes, 3u);
  EXPECT_EQ(ThreadsOfThisProcess() - before, 2 * 2 + 1);
  const std::string_view ping[] = {"PING"};
  EXPECT_EQ((*client)->CommandSync(ping)->str, "PONG");
  // Two connections per thread to each master.
  EXPECT_EQ((*client)->stats_for_testing().connects, 3u * 2 * 2);
  options->node.io_threads = 0;
  EXPECT_EQ(ClusterClient::Create(*options).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClusterClientTest, ABatchLeavesInOneWritePerNodeAndComesBackInOrder) {
  const BatchCost cost = SendOrderedBatch(*client_, prefix_, 90);
  EXPECT_EQ(cost.commands, 90u);
  EXPECT_EQ(cost.writes, 3u) << "one write per master";
}

TEST_F(ClusterClientTest, KeysInDifferentSlotsAreRefusedBeforeSending) {
  const redis::Script script = redis::Script::FromSource("return 1");
  const std::string a = prefix_ + "a", b = prefix_ + "b";
  ASSERT_NE(KeySlot(a), KeySlot(b));
  const std::string_view keys[] = {a, b};
  const redis::ClientStats before = client_->stats_for_testing();
  auto r = client_->EvalShaSyncForTesting(script, keys, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("hash tag"), std::string::npos) << r.status().message();
  EXPECT_EQ(client_->stats_for_testing().commands, before.commands);

  const std::string tagged_a = "{" + prefix_ + "}a", tagged_b = "{" + prefix_ + "}b";
  const std::string_view tagged[] = {tagged_a, tagged_b};
  auto same_slot = client_->EvalShaSyncForTesting(script, tagged, {});
  ASSERT_TRUE(same_slot.ok()) << same_slot.status().ToString();
  EXPECT_EQ(same_slot->integer, 1);
}

TEST_F(ClusterClientTest, UnreachableSeedsLeaveItUnavailableNotBroken) {
  redis::ClusterOptions options;
  options.seeds = {"127.0.0.1:" + std::to_string(FreeLoopbackPort())};
  options.node.connect_timeout = 20ms;
  auto client = ClusterClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_FALSE((*client)->Connected().ok());
  const std::string_view get[] = {"GET", "k"};
  auto r = (*client)->CommandSync(get);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();

  options.node.timeout = Duration(0);
  EXPECT_EQ(ClusterClient::Create(options).status().code(), StatusCode::kInvalidArgument);
}

// A field of the EVALSHA calls' statistics on the node at `port` (INFO commandstats): "calls",
// "failed_calls" (a script's error reply), "rejected_calls" (MOVED, ASK, ...).
int64_t EvalShaStat(const RedisCluster& cluster, int port, const std::string& field = "calls") {
  const std::string stats = cluster.Cli(port, {"INFO", "commandstats"});
  const auto line = stats.find("cmdstat_evalsha:");
  const auto at = line == std::string::npos ? line : stats.find(field + "=", line);
  return at == std::string::npos ? 0 : std::atoll(stats.c_str() + at + field.size() + 1);
}

// CheckAll on a cluster: limits of one key share its hash tag, so one slot. Keys in several
// slots of one master are decided by one script there (the flag allow-cross-slot-keys); keys on
// several masters by a peek on each master, then, if every check admits, a charge on each.
class ClusterStoreTest : public RedisStoreTest {
 protected:
  // EVALSHA calls each master has run.
  std::map<int, int64_t> EvalShaCalls() const {
    std::map<int, int64_t> calls;
    for (int port : target_->ports) calls[port] = EvalShaStat(*SharedCluster(), port);
    return calls;
  }

  // EVALSHA calls since `before`, per master.
  std::map<int, int64_t> EvalShaCallsSince(const std::map<int, int64_t>& before) const {
    std::map<int, int64_t> since = EvalShaCalls();
    for (auto& [port, n] : since) n -= before.at(port);
    return since;
  }

  // Loads the CheckAll script on every master, so that counts of EVALSHA calls see no NOSCRIPT.
  void WarmUp(RedisStore& store) {
    const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 1, 24h);
    const auto keys = KeysOnEveryNode(*target_, "warm", target_->ports.size());
    std::vector<CheckRequest> requests;
    for (const auto& key : keys) requests.push_back({.scope = "warm", .limit = &limit, .key = key});
    ASSERT_TRUE(store.CheckAll(requests).ok());
  }
};

// Checks on keys of several slots of one master, each key twice, queued together: one script
// call there decides them all (CoalescibleCall::across_slots), each as on its own.
TEST_F(ClusterStoreTest, CoalescedChecksOfSeveralSlotsOfOneMasterShareACall) {
  auto store = MakeStore({.io_threads = 1, .connections_per_thread = 1});
  ASSERT_NE(store, nullptr);
  const auto spread = KeysOnEveryNode(*target_, "spread", 3 * 8);  // every third on one master
  std::vector<std::string> keys;
  std::set<int> slots;
  for (size_t i = 0; i < spread.size(); i += 3) {
    keys.push_back(spread[i]);
    slots.insert(KeySlot(store->KeysOf("s", spread[i])[0]));
  }
  ASSERT_EQ(slots.size(), keys.size());
  const Limit limit = *Limit::Create(Algorithm::kGcra, 2, 1h);
  const CheckRequest peek = {.scope = "s", .limit = &limit, .key = keys[0], .cost = 0};
  ASSERT_TRUE(store->Check(peek).ok());  // loads the script
  const auto before = EvalShaCalls();
  // Queued from a callback on the store's one I/O thread: no write leaves before it returns.
  std::vector<std::promise<Result<Decision>>> decisions(2 * keys.size());
  store->CheckAsync(peek, [&](Result<Decision>) {
    for (size_t i = 0; i < decisions.size(); ++i) {
      store->CheckAsync({.scope = "s", .limit = &limit, .key = keys[i % keys.size()]},
                        [&decisions, i](Result<Decision> d) { decisions[i].set_value(d); });
    }
  });
  std::vector<Result<Decision>> got;
  for (auto& d : decisions) got.push_back(d.get_future().get());
  for (size_t i = 0; i < got.size(); ++i) {
    const Result<Decision>& d = got[i];
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(d->allowed) << i;
    EXPECT_EQ(d->remaining, i < keys.size() ? 1 : 0) << i;
  }
  const int master = target_->ports[0];
  for (const auto& [port, calls] : EvalShaCallsSince(before)) {
    EXPECT_EQ(calls, port == master ? 2 : 0) << "EVALSHA calls on " << port;
  }
}

TEST_F(ClusterStoreTest, CheckAllOnOneMasterIsOneScriptAcrossSlots) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  WarmUp(*store);
  // keys[0] and keys[3] on the first master, in two slots.
  const auto keys = KeysOnEveryNode(*target_, "one", 4);
  ASSERT_EQ(keys.size(), 4u);
  ASSERT_NE(KeySlot(keys[0]), KeySlot(keys[3]));
  const Limit per_second = *Limit::Create(Algorithm::kGcra, 5, 1s);
  const Limit per_day = *Limit::Create(Algorithm::kFixedWindow, 3, 24h);
  const Limit logged = *Limit::Create(Algorithm::kSlidingLog, 2, 24h);
  const std::vector<CheckRequest> requests = {
      {.scope = "per-second", .limit = &per_second, .key = keys[0]},
      {.scope = "per-day", .limit = &per_day, .key = keys[0]},
      {.scope = "logged", .limit = &logged, .key = keys[3]}};
  const auto before = EvalShaCalls();
  for (int i = 0; i < 3; ++i) {
    auto all = store->CheckAll(requests);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ((*all)[0].allowed && (*all)[1].allowed && (*all)[2].allowed, i < 2) << "call " << i;
    EXPECT_EQ((*all)[2].allowed, i < 2) << "call " << i;
  }
  const int master = target_->ports[0];
  for (const auto& [port, calls] : EvalShaCallsSince(before)) {
    EXPECT_EQ(calls, port == master ? 3 : 0) << "EVALSHA calls on " << port;
  }
  RedisCluster* cluster = SharedCluster();
  for (const auto& key : {store->KeysOf("per-day", keys[0])[0], store->KeysOf("logged", keys[3])[0],
                          store->KeysOf("logged", keys[3])[1]}) {
    EXPECT_EQ(cluster->Cli(master, {"EXISTS", key}), "1") << key;
  }
  // The third call was refused by the log: the others consumed nothing for it.
  const auto day = store->Check({.scope = "per-day", .limit = &per_day, .key = keys[0], .cost = 0});
  ASSERT_TRUE(day.ok());
  EXPECT_EQ(day->remaining, 1);
}

TEST_F(ClusterStoreTest, CheckAllAcrossMastersPeeksThenCharges) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  WarmUp(*store);
  const auto keys = KeysOnEveryNode(*target_, "many", 3);
  ASSERT_EQ(keys.size(), 3u);
  const Limit three = *Limit::Create(Algorithm::kFixedWindow, 3, 24h);
  const Limit two = *Limit::Create(Algorithm::kTokenBucket, 2, 24h);
  const std::vector<CheckRequest> requests = {{.scope = "a", .limit = &three, .key = keys[0]},
                                              {.scope = "b", .limit = &three, .key = keys[1]},
                                              {.scope = "c", .limit = &two, .key = keys[2]}};
  auto before = EvalShaCalls();
  for (int i = 0; i < 2; ++i) {
    auto all = store->CheckAll(requests);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    for (const auto& d : *all) EXPECT_TRUE(d.allowed) << "call " << i;
  }
  for (const auto& [port, calls] : EvalShaCallsSince(before)) {
    EXPECT_EQ(calls, 4) << "a peek and a charge per call on " << port;
  }
  // "c" is spent: the peeks refuse, and no master charges.
  before = EvalShaCalls();
  auto refused = store->CheckAll(requests);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_FALSE((*refused)[2].allowed);
  EXPECT_GT((*refused)[2].retry_after.count(), 0);
  for (int i : {0, 1}) {
    EXPECT_FALSE((*refused)[i].allowed);
    EXPECT_EQ((*refused)[i].retry_after.count(), 0);
    EXPECT_EQ((*refused)[i].remaining, 1) << "what a peek sees";
  }
  for (const auto& [port, calls] : EvalShaCallsSince(before)) {
    EXPECT_EQ(calls, 1) << "a peek only on " << port;
  }
  for (const char* scope : {"a", "b"}) {
    const auto d = store->Check({.scope = scope,
                                 .limit = &three,
                                 .key = scope == std::string("a") ? keys[0] : keys[1],
                                 .cost = 0});
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->remaining, 1) << scope;
  }
}

// The documented race bound: CheckAll on keys A and B of two masters, each limited to one unit,
// against a single check on B from another process sent at once (or, one round in three, after
// CheckAll answered). B admits once; CheckAll admits both or reports refusal; and A loses its unit
// to a refused CheckAll only when the other check took B between CheckAll's peek and its charge:
// under-admission by at most the refused request's cost on A, never over-admission.
TEST_F(ClusterStoreTest, CheckAllAcrossMastersRaceOnlyUnderAdmits) {
  auto first = MakeStore();
  auto second = MakeStore();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  const auto keys = KeysOnEveryNode(*target_, "race", 2);
  ASSERT_EQ(keys.size(), 2u);
  const Limit one = *Limit::Create(Algorithm::kFixedWindow, 1, 24h);
  constexpr int kRounds = 300;
  int admitted = 0, peek_refused = 0, raced = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string scope = "r" + std::to_string(round);
    const std::vector<CheckRequest> both = {{.scope = scope, .limit = &one, .key = keys[0]},
                                            {.scope = scope, .limit = &one, .key = keys[1]}};
    const CheckRequest b{.scope = scope, .limit = &one, .key = keys[1]};
    std::promise<Result<std::vector<Decision>>> all_done;
    std::promise<Result<Decision>> b_done;
    first->CheckAllAsync(both, [&](Result<std::vector<Decision>> r) { all_done.set_value(r); });
    auto all_future = all_done.get_future();
    if (round % 3 == 0) all_future.wait();
    second->CheckAsync(b, [&](Result<Decision> r) { b_done.set_value(r); });
    const auto all = all_future.get();
    const auto single = b_done.get_future().get();
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    ASSERT_TRUE(single.ok()) << single.status().ToString();
    const auto a_now = first->Check({.scope = scope, .limit = &one, .key = keys[0], .cost = 0});
    ASSERT_TRUE(a_now.ok());
    const bool a_spent = a_now->remaining == 0;
    const bool all_admitted = (*all)[0].allowed && (*all)[1].allowed;
    ASSERT_NE(all_admitted, single->allowed) << "round " << round << ": B admits exactly once";
    if (all_admitted) {
      EXPECT_TRUE(a_spent) << "round " << round;
      ++admitted;
      continue;
    }
    EXPECT_FALSE((*all)[0].allowed) << "round " << round;
    EXPECT_EQ((*all)[0].retry_after.count(), 0) << "round " << round;
    EXPECT_FALSE((*all)[1].allowed) << "round " << round;
    EXPECT_GT((*all)[1].retry_after.count(), 0) << "round " << round << ": B refused it";
    // A's decision is its state as the answer left it: spent when its master charged.
    EXPECT_EQ((*all)[0].remaining, a_spent ? 0 : 1) << "round " << round;
    (a_spent ? raced : peek_refused)++;
  }
  std::printf(
      "CheckAll across masters against a check on B, %d rounds: %d admitted, %d refused "
      "by the peek, %d refused by the charge (A's unit lost)\n",
      kRounds, admitted, peek_refused, raced);
  EXPECT_GE(admitted, kRounds / 3);
  // The check on B sent at once lands between the peek and the charge more often than not; a
  // bound a loaded machine still meets, so that the race's branch is exercised.
  EXPECT_GT(raced, 0);
}

// --- Clusters changing shape under load: each test starts a cluster of its own. ---

// `count` names "<stem>-<n>" whose slot is `slot`.
std::vector<std::string> KeysInSlot(const std::string& stem, int slot, size_t count) {
  std::vector<std::string> keys;
  for (int n = 0; keys.size() < count && n < 10'000'000; ++n) {
    std::string key = stem + "-" + std::to_string(n);
    if (KeySlot(key) == slot) keys.push_back(std::move(key));
  }
  return keys;
}

// Polls `done` every 5 ms until it holds or `timeout` has passed; whether it held.
bool WaitFor(const std::function<bool()>& done, Duration timeout) {
  const auto until = Steady::now() + timeout;
  while (!done()) {
    if (Steady::now() >= until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Decisions from several threads, each one at a time over the keys in turn, until stopped; every
// decision is recorded, and counted per key as it comes, for a test to wait on.
class Load {
 public:
  struct Sample {
    Steady::time_point start, end;
    size_t key;
    StatusCode code;
    bool allowed;
  };
  // One request on `key`: admitted or not, or why it was not decided.
  using Decide = std::function<Result<bool>(const std::string& key)>;

  Load(std::vector<std::string> keys, int threads, Decide decide)
      : keys_(std::move(keys)),
        decide_(std::move(decide)),
        admitted_(keys_.size()),
        denied_(keys_.size()),
        samples_(threads) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { Run(t); });
  }
  ~Load() { Stop(); }

  // Joins the threads; every sample, in order of start.
  std::vector<Sample> Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::vector<Sample> all;
    for (auto& s : samples_) all.insert(all.end(), s.begin(), s.end());
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.start < b.start; });
    return all;
  }

  const std::vector<std::string>& keys() const { return keys_; }
  // The smallest share of `count` any key has admitted so far.
  double Progress(int64_t count) const {
    int64_t least = count;
    for (const auto& a : admitted_) least = std::min(least, a.load());
    return static_cast<double>(least) / static_cast<double>(count);
  }
  bool EveryKeyDenied() const {
    return std::all_of(denied_.begin(), denied_.end(), [](auto& d) { return d.load() > 0; });
  }
  int64_t decided() const { return decided_.load(); }
  int64_t failed() const { return failed_.load(); }

 private:
  void Run(int t) {
    for (size_t i = t; !stop_; ++i) {
      const size_t key = i % keys_.size();
      const auto start = Steady::now();
      const Result<bool> d = decide_(keys_[key]);
      samples_[t].push_back({start, Steady::now(), key, d.status().code(), d.ok() && *d});
      if (!d.ok()) {
        ++failed_;
        std::this_thread::sleep_for(1ms);  // no busy loop while the cluster refuses
        continue;
      }
      ++decided_;
      ++(*d ? admitted_ : denied_)[key];
    }
  }

  const std::vector<std::string> keys_;
  const Decide decide_;
  std::vector<std::atomic<int64_t>> admitted_, denied_;
  std::atomic<int64_t> decided_{0}, failed_{0};
  std::vector<std::vector<Load::Sample>> samples_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

Load::Decide CheckOf(Store& store, const Limit& limit, std::string scope) {
  return [&store, &limit, scope](const std::string& key) -> Result<bool> {
    auto d = store.Check({.scope = scope, .limit = &limit, .key = key});
    if (!d.ok()) return d.status();
    return d->allowed;
  };
}

// What (scope, key)'s state in Redis has consumed of `limit`, by a peek; -1 (with a test
// failure) if the peek fails.
std::function<int64_t(const std::string&)> ConsumedOf(Store& store, const Limit& limit,
                                                      std::string scope) {
  return [&store, &limit, scope](const std::string& key) -> int64_t {
    auto peek = store.Check({.scope = scope, .limit = &limit, .key = key, .cost = 0});
    EXPECT_TRUE(peek.ok()) << key << ": " << peek.status().ToString();
    return peek.ok() ? limit.count() - peek->remaining : -1;
  };
}

struct Summary {
  size_t decisions = 0, errors = 0;
  Duration slowest{0};
  // From the first failed decision's start to the last one's end; zero without failures.
  Duration gap{0};
  std::map<StatusCode, size_t> by_code;
};

Summary Summarize(const std::vector<Load::Sample>& samples) {
  Summary s;
  std::optional<Steady::time_point> first, last;
  for (const auto& x : samples) {
    ++s.decisions;
    s.slowest = std::max(s.slowest, std::chrono::duration_cast<Duration>(x.end - x.start));
    if (x.code == StatusCode::kOk) continue;
    ++s.errors;
    ++s.by_code[x.code];
    if (!first) first = x.start;
    last = std::max(last.value_or(x.end), x.end);
  }
  if (first) s.gap = std::chrono::duration_cast<Duration>(*last - *first);
  return s;
}

void Print(const char* what, const Summary& s) {
  std::printf("%s: %zu decisions, %zu failed (", what, s.decisions, s.errors);
  for (auto [code, n] : s.by_code) std::printf("%s %zu ", StatusCodeName(code), n);
  std::printf("), slowest %.1f ms, failures spanned %.1f ms\n", s.slowest.count() / 1000.0,
              s.gap.count() / 1000.0);
}

// Per key: admitted, denied, and not decided.
struct PerKey {
  std::vector<int64_t> admitted, denied, failed;
};

PerKey CountPerKey(const std::vector<Load::Sample>& samples, size_t keys) {
  PerKey n{std::vector<int64_t>(keys), std::vector<int64_t>(keys), std::vector<int64_t>(keys)};
  for (const auto& x : samples) {
    auto& counter = x.code != StatusCode::kOk ? n.failed : x.allowed ? n.admitted : n.denied;
    ++counter[x.key];
  }
  return n;
}

// What each key admitted, as the callers saw it, against what its state in Redis has consumed
// (`consumed`, a peek after the load): equal but for decisions that failed (a deadline may pass
// after the script ran), and never above the limit. Returns what each key consumed.
std::vector<int64_t> ExpectStateAccountsForEveryAdmission(
    int64_t count, const std::vector<std::string>& keys, const std::vector<Load::Sample>& samples,
    const std::function<int64_t(const std::string&)>& consumed) {
  const PerKey n = CountPerKey(samples, keys.size());
  std::vector<int64_t> used;
  for (size_t k = 0; k < keys.size(); ++k) {
    used.push_back(consumed(keys[k]));
    EXPECT_LE(n.admitted[k], count) << keys[k];
    EXPECT_GE(used[k], n.admitted[k]) << keys[k] << ": state lost admissions";
    EXPECT_LE(used[k], n.admitted[k] + n.failed[k]) << keys[k];
  }
  return used;
}

class ClusterUnderChange : public ::testing::Test {
 protected:
  static constexpr Duration kTimeout = 100ms;
  // How late a deadline's timer may fire on two cores shared with six redis-servers under
  // change: up to 98 ms was seen at a load average of 12.
  static constexpr Duration kLateTimer = 100ms;

  void SetUp() override {
    cluster_ = RedisCluster::Start();
    ASSERT_NE(cluster_, nullptr);
  }

  std::unique_ptr<RedisStore> MakeStore() {
    auto store = RedisStore::Create({.url = cluster_->url(), .timeout = kTimeout});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Keys in `slot` and as many elsewhere.
  static std::vector<std::string> LoadKeys(int slot) {
    std::vector<std::string> keys = KeysInSlot("moving", slot, 8);
    for (int i = 0; i < 8; ++i) keys.push_back("steady-" + std::to_string(i));
    return keys;
  }

  // A master other than `port`.
  int AnotherMaster(int port) const {
    const auto masters = cluster_->MasterPorts();
    return masters[0] != port ? masters[0] : masters[1];
  }

  // A key "<stem><n>" on the master of `key`, in another slot; empty if none of 100 000 is.
  std::string KeyBesides(const std::string& key, const std::string& stem) const {
    const int slot = KeySlot(key);
    const int master = cluster_->MasterOfSlot(slot);
    for (int i = 0; i < 100'000; ++i) {
      const std::string candidate = stem + std::to_string(i);
      const int s = KeySlot(candidate);
      if (s != slot && cluster_->MasterOfSlot(s) == master) return candidate;
    }
    return {};
  }

  std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(ClusterUnderChange, RedirectionsAreFollowedOnce) {
  auto client = ConnectCluster(*cluster_, 1h);  // no periodic refresh: redirections only
  ASSERT_NE(client, nullptr);
  const redis::Script incr = redis::Script::FromSource("return redis.call('INCR', KEYS[1])");
  auto increment = [&](const std::string& key) {
    const std::string_view keys[] = {key};
    auto r = client->EvalShaSyncForTesting(incr, keys, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->integer : -1;
  };
  const std::string key = "moving", fresh = "{moving}:fresh";
  const int slot = KeySlot(key);
  const int from = cluster_->MasterOfSlot(slot);
  const auto masters = cluster_->MasterPorts();
  const int to = masters[0] != from ? masters[0] : masters[1];
  EXPECT_EQ(increment(key), 1);

  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to));
  EXPECT_EQ(increment(key), 2) << "a key still on the source is served there";
  EXPECT_EQ(increment(fresh), 1) << "a key not on the source is asked of the target";
  EXPECT_EQ(client->cluster_stats_for_testing().asked, 1u);
  EXPECT_EQ(cluster_->Cli(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}), "1")
      << "the fresh key lives on the target";

  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot));
  EXPECT_EQ(increment(key), 3) << "after MIGRATE, ASK to the target";
  EXPECT_EQ(client->cluster_stats_for_testing().asked, 2u);

  ASSERT_TRUE(cluster_->EndSlotMigration(slot));
  EXPECT_EQ(increment(key), 4) << "MOVED to the new owner";
  EXPECT_EQ(client->cluster_stats_for_testing().moved, 1u);
  const auto until = Steady::now() + 5s;
  while (client->MasterOfForTesting(slot) != "127.0.0.1:" + std::to_string(to) &&
         Steady::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(client->MasterOfForTesting(slot), "127.0.0.1:" + std::to_string(to))
      << "MOVED refreshed the map";
  EXPECT_EQ(increment(key), 5);
  EXPECT_EQ(client->cluster_stats_for_testing().moved, 1u) << "routed straight to the new owner";
}

// Without traffic there are no redirections: the periodic refresh alone follows a master that
// joins, takes a slot, gives it back and leaves.
TEST_F(ClusterUnderChange, PeriodicRefreshFollowsMastersAddedAndRemoved) {
  auto client = ConnectCluster(*cluster_, 100ms);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->cluster_stats_for_testing().nodes, 3u);
  const redis::Script incr = redis::Script::FromSource("return redis.call('INCR', KEYS[1])");
  const std::string key = "rehomed";
  const std::string_view keys[] = {key};
  const int slot = KeySlot(key);
  const int home = cluster_->MasterOfSlot(slot);
  EXPECT_EQ(client->EvalShaSyncForTesting(incr, keys, {})->integer, 1);
  auto serves = [&](int port) {
    const std::string address = "127.0.0.1:" + std::to_string(port);
    const auto until = Steady::now() + 5s;
    while (client->MasterOfForTesting(slot) != address && Steady::now() < until) {
      std::this_thread::sleep_for(10ms);
    }
    return client->MasterOfForTesting(slot) == address;
  };
  auto move = [&](int to) {
    return cluster_->BeginSlotMigration(slot, to) && cluster_->MigrateSlotKeys(slot) &&
           cluster_->EndSlotMigration(slot);
  };

  const int added = cluster_->AddMaster();
  ASSERT_NE(added, 0);
  ASSERT_TRUE(move(added));
  EXPECT_TRUE(serves(added)) << "the new master's slot was not learned";
  EXPECT_EQ(client->cluster_stats_for_testing().nodes, 4u);
  EXPECT_EQ(client->EvalShaSyncForTesting(incr, keys, {})->integer, 2);

  ASSERT_TRUE(move(home));
  EXPECT_TRUE(serves(home));
  ASSERT_TRUE(cluster_->RemoveNode(added));
  const auto until = Steady::now() + 5s;
  while (client->cluster_stats_for_testing().nodes != 3 && Steady::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(client->cluster_stats_for_testing().nodes, 3u) << "the removed master was not dropped";
  EXPECT_EQ(client->EvalShaSyncForTesting(incr, keys, {})->integer, 3);
  EXPECT_EQ(client->cluster_stats_for_testing().moved, 0u);
  EXPECT_EQ(client->cluster_stats_for_testing().asked, 0u);
}

// Keys of every kind in the slot being moved, under load through every step of the move, with
// each step taken only once every key has admitted more: a share of the limit before the move,
// more while the slot is half migrated, more once its keys are on the target, and the limit
// reached after. Redis refuses no single-key check (fixed_window). Two-key scripts (sliding_log's
// state and running total; CheckAll on one key under two limiter names) meet its TRYAGAIN while
// their keys are on both sides, and are then refused at once, and are served by the target
// through ASK once all their keys are there. No decision outlives its deadline, and no key admits
// more than its limit.
TEST_F(ClusterUnderChange, LiveResharding) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Duration period = PeriodAwayFromABoundary();
  const Limit single = *Limit::Create(Algorithm::kFixedWindow, 2000, period);
  const Limit log = *Limit::Create(Algorithm::kSlidingLog, 3000, period);
  const Limit all_fixed = *Limit::Create(Algorithm::kFixedWindow, 4000, period);
  const Limit all_sliding = *Limit::Create(Algorithm::kSlidingWindow, 3000, period);  // binding
  const int slot = KeySlot("resharded");
  const int from = cluster_->MasterOfSlot(slot);
  const auto masters = cluster_->MasterPorts();
  const int to = masters[0] != from ? masters[0] : masters[1];

  Load singles(LoadKeys(slot), 4, CheckOf(*store, single, "load"));
  Load logs(KeysInSlot("log", slot, 3), 1, CheckOf(*store, log, "log"));
  Load alls(KeysInSlot("all", slot, 2), 1, [&](const std::string& key) -> Result<bool> {
    const std::vector<CheckRequest> both = {
        {.scope = "all-fixed", .limit = &all_fixed, .key = key},
        {.scope = "all-sliding", .limit = &all_sliding, .key = key}};
    auto all = store->CheckAll(both);
    if (!all.ok()) return all.status();
    return (*all)[0].allowed && (*all)[1].allowed;
  });
  // Each step waits for the loads that can progress then: no two-key script while its keys are
  // split.
  auto at_least = [](const Load& load, const Limit& limit, double share) {
    return [&load, &limit, share] { return load.Progress(limit.count()) >= share; };
  };
  auto state = [&] {
    char line[200];
    std::snprintf(line, sizeof(line),
                  "progress: fixed_window %.2f, sliding_log %.2f (%lld failed), CheckAll %.2f",
                  singles.Progress(single.count()), logs.Progress(log.count()),
                  static_cast<long long>(logs.failed()), alls.Progress(all_sliding.count()));
    return std::string(line);
  };
  constexpr Duration kStep = 30s;  // for each step's progress: generous, for a loaded machine

  ASSERT_TRUE(WaitFor(
      [&] {
        return at_least(singles, single, 0.2)() && at_least(logs, log, 0.2)() &&
               at_least(alls, all_sliding, 0.2)();
      },
      kStep))
      << state();
  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to));

  // Half migrated: sliding_log's totals, CheckAll's first state and half the single keys move.
  ASSERT_TRUE(WaitFor(
      [&] { return at_least(singles, single, 0.4)() && at_least(logs, log, 0.4)(); }, kStep))
      << state();
  std::vector<std::string> half;
  for (const auto& key : logs.keys()) half.push_back(store->KeysOf("log", key)[1]);
  for (const auto& key : alls.keys()) half.push_back(store->KeysOf("all-fixed", key)[0]);
  for (size_t k = 0; k < 4; ++k) half.push_back(store->KeysOf("load", singles.keys()[k])[0]);
  ASSERT_TRUE(cluster_->MigrateKeys(half));
  const int64_t logs_failed = logs.failed();
  ASSERT_TRUE(WaitFor(
      [&] { return logs.failed() >= logs_failed + 20 && at_least(singles, single, 0.5)(); }, kStep))
      << "two-key scripts on keys split between the nodes were not refused; " << state();

  // Every key on the target: served there through ASK.
  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot));
  const int64_t logs_decided = logs.decided(), alls_decided = alls.decided();
  ASSERT_TRUE(WaitFor(
      [&] {
        return logs.decided() >= logs_decided + 20 && alls.decided() >= alls_decided + 20 &&
               at_least(singles, single, 0.7)() && at_least(logs, log, 0.5)();
      },
      kStep))
      << "two-key scripts were not served by the target after ASK; " << state();
  ASSERT_TRUE(cluster_->EndSlotMigration(slot));

  ASSERT_TRUE(WaitFor(
      [&] { return singles.EveryKeyDenied() && logs.EveryKeyDenied() && alls.EveryKeyDenied(); },
      kStep))
      << "some key never reached its limit; " << state();
  const auto single_samples = singles.Stop();
  const auto log_samples = logs.Stop();
  const auto all_samples = alls.Stop();

  const Summary s = Summarize(single_samples), l = Summarize(log_samples),
                a = Summarize(all_samples);
  Print("live resharding, fixed_window", s);
  Print("live resharding, sliding_log (two keys)", l);
  Print("live resharding, CheckAll (two limits)", a);
  // Redis refuses single-key checks at no step of the move (a loaded machine may still let a
  // deadline pass); two-key scripts are refused, or their deadline passes, nothing else.
  for (auto [code, n] : s.by_code) EXPECT_EQ(code, StatusCode::kDeadlineExceeded) << n;
  for (const Summary* x : {&l, &a}) {
    for (auto [code, n] : x->by_code) {
      EXPECT_TRUE(code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded)
          << StatusCodeName(code) << " " << n;
    }
  }
  for (const Summary* x : {&s, &l, &a}) {
    EXPECT_LE(x->slowest, kTimeout + kLateTimer) << "a decision outlived its deadline";
  }
  const std::string source_errors = cluster_->Cli(from, {"INFO", "errorstats"});
  for (const char* error : {"errorstat_ASK", "errorstat_MOVED", "errorstat_TRYAGAIN"}) {
    EXPECT_NE(source_errors.find(error), std::string::npos) << "no " << error << " on the source";
  }

  // Every key reached its limit, and no window admitted more.
  const auto single_used = ExpectStateAccountsForEveryAdmission(
      single.count(), singles.keys(), single_samples, ConsumedOf(*store, single, "load"));
  const auto log_used = ExpectStateAccountsForEveryAdmission(log.count(), logs.keys(), log_samples,
                                                             ConsumedOf(*store, log, "log"));
  const auto sliding_used =
      ExpectStateAccountsForEveryAdmission(all_sliding.count(), alls.keys(), all_samples,
                                           ConsumedOf(*store, all_sliding, "all-sliding"));
  const auto fixed_used = ExpectStateAccountsForEveryAdmission(
      all_fixed.count(), alls.keys(), all_samples, ConsumedOf(*store, all_fixed, "all-fixed"));
  for (size_t k = 0; k < singles.keys().size(); ++k) {
    EXPECT_EQ(single_used[k], single.count()) << singles.keys()[k];
  }
  for (size_t k = 0; k < logs.keys().size(); ++k) {
    EXPECT_EQ(log_used[k], log.count()) << logs.keys()[k];
  }
  for (size_t k = 0; k < alls.keys().size(); ++k) {
    EXPECT_EQ(sliding_used[k], all_sliding.count()) << alls.keys()[k];
    EXPECT_EQ(fixed_used[k], sliding_used[k])
        << alls.keys()[k] << ": CheckAll was not all or nothing";
  }

  for (const auto& key : store->KeysOf("load", singles.keys().front())) {
    if (cluster_->Cli(from, {"EXISTS", key}) == "1") ADD_FAILURE() << key << " left behind";
  }
  EXPECT_EQ(cluster_->Cli(to, {"EXISTS", store->KeysOf("load", singles.keys().front())[0]}), "1");
}

// CheckAll on keys of two slots of one master while one slot moves to another master. While the
// moving slot's keys are on the source, the source decides them in one script. Once they left,
// the source answers ASK when the moving slot's keys are the declared ones, and the script meets a
// key its node no longer holds when they are not: either way the call fails with UNAVAILABLE
// having written nothing (following ASK would let the target read the other slot's keys as its
// own, absent). Once the slot is assigned, the keys are on two masters: a peek and a charge each.
TEST_F(ClusterUnderChange, CheckAllAcrossSlotsDuringAMigration) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const std::string moving = "moving";
  const int slot = KeySlot(moving);
  const int from = cluster_->MasterOfSlot(slot);
  const int to = AnotherMaster(from);
  const std::string steady = KeyBesides(moving, "steady-");
  ASSERT_FALSE(steady.empty());
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 100, 24h);
  const std::vector<CheckRequest> moving_first = {{.scope = "s", .limit = &limit, .key = moving},
                                                  {.scope = "s", .limit = &limit, .key = steady}};
  const std::vector<CheckRequest> steady_first = {moving_first[1], moving_first[0]};
  int admitted = 0;
  auto expect_admitted = [&](const std::vector<CheckRequest>& requests, const char* when) {
    auto all = store->CheckAll(requests);
    ASSERT_TRUE(all.ok()) << when << ": " << all.status().ToString();
    EXPECT_TRUE((*all)[0].allowed && (*all)[1].allowed) << when;
    ++admitted;
  };
  auto expect_unavailable = [&](const std::vector<CheckRequest>& requests, const char* when) {
    auto all = store->CheckAll(requests);
    ASSERT_FALSE(all.ok()) << when;
    EXPECT_EQ(all.status().code(), StatusCode::kUnavailable)
        << when << ": " << all.status().ToString();
  };
  auto expect_used = [&](const std::string& key) {
    auto d = store->Check({.scope = "s", .limit = &limit, .key = key, .cost = 0});
    ASSERT_TRUE(d.ok()) << key << ": " << d.status().ToString();
    EXPECT_EQ(limit.count() - d->remaining, admitted) << key;
  };

  expect_admitted(moving_first, "before the move");
  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to));
  expect_admitted(moving_first, "the slot migrating, its key on the source");
  expect_admitted(steady_first, "the slot migrating, its key on the source");
  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot));
  expect_unavailable(moving_first, "ASK, not followed");
  expect_unavailable(steady_first, "the moved key out of the source's reach");
  expect_used(moving);  // a single check follows ASK
  expect_used(steady);
  ASSERT_TRUE(cluster_->EndSlotMigration(slot));
  // MOVED refreshes the map; until then a call may meet a key out of its node's reach.
  ASSERT_TRUE(WaitFor([&] { return store->CheckAll(moving_first).ok(); }, 10s));
  ++admitted;
  expect_admitted(steady_first, "on two masters");
  expect_used(moving);
  expect_used(steady);
}

// Two slots of one master migrating to the same target, the keys of one already moved: the
// source answers a CheckAll on both with ASK, which is not followed. With ASKING the target would
// serve the script the other slot's key, still on the source, as absent, and charge a fresh state.
TEST_F(ClusterUnderChange, CheckAllAcrossSlotsDoesNotFollowAsk) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const std::string moved = "moving";
  const int moved_slot = KeySlot(moved);
  const int from = cluster_->MasterOfSlot(moved_slot);
  const int to = AnotherMaster(from);
  const std::string staying = KeyBesides(moved, "staying-");
  ASSERT_FALSE(staying.empty());
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 100, 24h);
  const std::vector<CheckRequest> both = {{.scope = "s", .limit = &limit, .key = moved},
                                          {.scope = "s", .limit = &limit, .key = staying}};
  auto all = store->CheckAll(both);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  // The harness follows one migration, the last begun: the moved slot's.
  ASSERT_TRUE(cluster_->BeginSlotMigration(KeySlot(staying), to));
  ASSERT_TRUE(cluster_->BeginSlotMigration(moved_slot, to));
  ASSERT_TRUE(cluster_->MigrateSlotKeys(moved_slot));
  all = store->CheckAll(both);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), StatusCode::kUnavailable) << all.status().ToString();
  // On the target, asking: the state is not there.
  auto target = Inspector(to);
  ASSERT_NE(target, nullptr);
  const std::string staying_key = store->KeysOf("s", staying)[0];
  const std::string_view exists[] = {"EXISTS", staying_key};
  const auto there = base::Await<Result<redis::Reply>>([&](auto done) {
    target->Command(exists, redis::CallOptions{.asking = true}, std::move(done));
  });
  ASSERT_TRUE(there.ok()) << there.status().ToString();
  EXPECT_EQ(there->integer, 0) << "a fresh state charged on the target";
  // On the source, its one admission.
  auto d = store->Check({.scope = "s", .limit = &limit, .key = staying, .cost = 0});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->remaining, limit.count() - 1);
}

// Checks of two slots of one master share a call while one of the slots migrates away, its key
// already on the target. The source redirects the call when it declares the moved key (ASK), and
// the call fails on that key before writing anything when it does not (check_many.lua reads every
// key first): either way each check is sent again on its own, the moved one through ASK, and each
// is charged once.
TEST_F(ClusterUnderChange, ACoalescedCallMeetingAMovedKeySendsEachCheckAlone) {
  auto made = RedisStore::Create(
      {.url = cluster_->url(), .timeout = 10s, .io_threads = 1, .connections_per_thread = 1});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  RedisStore& store = **made;
  const std::string moving = "moving";
  const int slot = KeySlot(moving);
  const int from = cluster_->MasterOfSlot(slot);
  const std::string steady = KeyBesides(moving, "steady-");
  ASSERT_FALSE(steady.empty());
  const Limit limit = *Limit::Create(Algorithm::kGcra, 100, 24h);
  // Two checks queued from a callback on the store's one I/O thread: they share a call.
  auto check_together = [&](const std::string& first, const std::string& second) {
    std::promise<Result<Decision>> decided[2];
    const CheckRequest peek = {.scope = "s", .limit = &limit, .key = steady, .cost = 0};
    store.CheckAsync(peek, [&](Result<Decision>) {
      store.CheckAsync({.scope = "s", .limit = &limit, .key = first},
                       [&](Result<Decision> d) { decided[0].set_value(d); });
      store.CheckAsync({.scope = "s", .limit = &limit, .key = second},
                       [&](Result<Decision> d) { decided[1].set_value(d); });
    });
    const Result<Decision> got[] = {decided[0].get_future().get(), decided[1].get_future().get()};
    for (const Result<Decision>& d : got) {
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      EXPECT_TRUE(d->allowed);
    }
  };
  auto expect_used = [&](const std::string& key, int64_t admitted) {
    auto d = store.Check({.scope = "s", .limit = &limit, .key = key, .cost = 0});
    ASSERT_TRUE(d.ok()) << key << ": " << d.status().ToString();
    EXPECT_EQ(limit.count() - d->remaining, admitted) << key;
  };

  // A check's own script loaded everywhere, so that the counts below see no NOSCRIPT.
  for (int port : cluster_->MasterPorts()) {
    cluster_->Cli(port, {"SCRIPT", "LOAD", redis::CheckScript(Algorithm::kGcra).source});
  }
  check_together(steady, moving);
  const int to = AnotherMaster(from);
  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to));
  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot));
  struct Counts {
    int64_t failed, rejected;
  };
  auto counts = [&] {
    return Counts{EvalShaStat(*cluster_, from, "failed_calls"),
                  EvalShaStat(*cluster_, from, "rejected_calls")};
  };
  Counts before = counts();
  check_together(steady, moving);
  Counts after = counts();
  EXPECT_EQ(after.failed, before.failed + 1) << "the shared call did not fail on the moved key";
  EXPECT_EQ(after.rejected, before.rejected + 1) << "the moved key's own call, ASK";
  before = after;
  check_together(moving, steady);
  after = counts();
  EXPECT_EQ(after.failed, before.failed);
  EXPECT_EQ(after.rejected, before.rejected + 2) << "ASK to the shared call and to the moved key's";
  expect_used(steady, 3);
  expect_used(moving, 3);
}

TEST_F(ClusterUnderChange, ManualFailover) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 400, PeriodAwayFromABoundary());
  const int slot = KeySlot("failed-over");
  const int master = cluster_->MasterOfSlot(slot);
  const int replica = cluster_->ReplicaOf(master);
  ASSERT_NE(replica, 0);
  Load load(LoadKeys(slot), 6, CheckOf(*store, limit, "load"));

  std::this_thread::sleep_for(300ms);
  const auto failover = Steady::now();
  ASSERT_TRUE(cluster_->Failover(replica));
  const auto converged = Steady::now();
  const int64_t calls_converged = EvalShaStat(*cluster_, replica);
  std::this_thread::sleep_for(500ms);
  const auto samples = load.Stop();

  Summary s = Summarize(samples);
  std::printf("CLUSTER FAILOVER converged in %.1f ms\n",
              std::chrono::duration<double, std::milli>(converged - failover).count());
  Print("manual failover", s);
  EXPECT_LE(s.slowest, kTimeout + kLateTimer) << "a decision outlived its deadline";
  EXPECT_EQ(cluster_->MasterOfSlot(slot), replica);
  EXPECT_GT(EvalShaStat(*cluster_, replica), calls_converged) << "not routed to the new master";
  std::vector<Load::Sample> after;
  std::copy_if(samples.begin(), samples.end(), std::back_inserter(after),
               [&](const auto& x) { return x.start > converged + 200ms; });
  EXPECT_EQ(Summarize(after).errors, 0u) << "decisions still fail after convergence";
  ExpectStateAccountsForEveryAdmission(limit.count(), load.keys(), samples,
                                       ConsumedOf(*store, limit, "load"));
}

// kill -9 of a master halfway through its keys' limit, under load until every key has reached
// its limit on the promoted replica. Redis replicates asynchronously and RedisStore does not WAIT
// for replicas, so admissions the dead master acknowledged but had not yet sent to its replica are
// lost, and the new master admits them again: a window can admit more than its limit by that
// much. The master streams each script's effects to its replica in the event-loop turn in which
// it replies, so what can be lost is what it acknowledged in its last moments: the test measures
// the over-admission and bounds it by the admissions acknowledged in the last kReplicationLag
// before the kill. Keys on the other masters admit exactly their limit.
TEST_F(ClusterUnderChange, MasterKilled) {
  constexpr Duration kReplicationLag = 50ms;  // far more than a loopback replica lags, loaded
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 3000, PeriodAwayFromABoundary());
  const int slot = KeySlot("killed");
  const int master = cluster_->MasterOfSlot(slot);
  const int replica = cluster_->ReplicaOf(master);
  ASSERT_NE(replica, 0);
  const std::vector<std::string> keys = LoadKeys(slot);
  std::vector<bool> of_master;  // the keys the master to be killed serves
  for (const auto& key : keys) {
    of_master.push_back(cluster_->MasterOfSlot(KeySlot(key)) == master);
  }
  auto on_killed = [&](size_t key) { return of_master[key]; };
  Load load(keys, 6, CheckOf(*store, limit, "load"));

  ASSERT_TRUE(WaitFor([&] { return load.Progress(limit.count()) >= 0.5; }, 30s));
  const auto killed = Steady::now();
  cluster_->Kill(master);
  const auto dead = Steady::now();
  const auto until = killed + 20s;
  while (cluster_->MasterOfSlot(slot) != replica && Steady::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(cluster_->MasterOfSlot(slot), replica) << "no failover within 20 s:\n"
                                                   << cluster_->Cli(replica, {"CLUSTER", "NODES"});
  ASSERT_TRUE(cluster_->WaitHealthy(10s, 3));
  const auto converged = Steady::now();
  const int64_t calls_converged = EvalShaStat(*cluster_, replica);
  ASSERT_TRUE(WaitFor([&] { return load.EveryKeyDenied(); }, 30s))
      << "some key never reached its limit";
  std::this_thread::sleep_for(200ms);
  const auto samples = load.Stop();

  const Summary s = Summarize(samples);
  std::printf("kill -9: the replica took over after %.1f ms\n",
              std::chrono::duration<double, std::milli>(converged - killed).count());
  Print("master killed", s);
  std::vector<Load::Sample> of_killed;
  std::copy_if(samples.begin(), samples.end(), std::back_inserter(of_killed),
               [&](const auto& x) { return on_killed(x.key); });
  Print("  of which on the killed master's keys", Summarize(of_killed));
  EXPECT_LE(s.slowest, kTimeout + kLateTimer) << "a decision outlived its deadline";
  EXPECT_GT(EvalShaStat(*cluster_, replica), calls_converged) << "not routed to the new master";
  std::vector<Load::Sample> after;
  std::copy_if(samples.begin(), samples.end(), std::back_inserter(after),
               [&](const auto& x) { return x.start > converged + 200ms; });
  EXPECT_EQ(Summarize(after).errors, 0u) << "decisions still fail after convergence";

  // Admissions the dead master acknowledged last: they started before it died (its replica was
  // promoted only after the node timeout, seconds after any of them ended).
  int64_t acknowledged_last = 0;
  for (const auto& x : of_killed) {
    acknowledged_last += x.allowed && x.start < dead && x.end >= killed - kReplicationLag;
  }
  const PerKey n = CountPerKey(samples, load.keys().size());
  const auto consumed = ConsumedOf(*store, limit, "load");
  int64_t over = 0;
  for (size_t k = 0; k < load.keys().size(); ++k) {
    const std::string& key = load.keys()[k];
    // Every key was denied: its window has consumed exactly the limit.
    EXPECT_EQ(consumed(key), limit.count()) << key;
    // Lost admissions come back as over-admission; decisions that failed after their script ran
    // make up for some.
    EXPECT_GE(n.admitted[k], limit.count() - n.failed[k]) << key;
    if (on_killed(k)) {
      over += std::max<int64_t>(0, n.admitted[k] - limit.count());
      if (n.admitted[k] > limit.count()) {
        std::printf("kill -9: %s admitted %lld, %lld over its limit\n", key.c_str(),
                    static_cast<long long>(n.admitted[k]),
                    static_cast<long long>(n.admitted[k] - limit.count()));
      }
    } else {
      EXPECT_LE(n.admitted[k], limit.count()) << key << ": its master was not killed";
    }
  }
  std::printf(
      "kill -9: the killed master's %zu keys admitted %lld more than their limit; it had "
      "acknowledged %lld admissions in its last %lld ms\n",
      static_cast<size_t>(std::count(of_master.begin(), of_master.end(), true)),
      static_cast<long long>(over), static_cast<long long>(acknowledged_last),
      static_cast<long long>(kReplicationLag.count() / 1000));
  EXPECT_GT(acknowledged_last, 0) << "the master was not admitting when it was killed";
  EXPECT_LE(over, acknowledged_last) << "more admissions lost than the replica can lag behind";
}

}  // namespace
}  // namespace sluice::testing
