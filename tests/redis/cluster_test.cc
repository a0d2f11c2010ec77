// Redis Cluster: slots, URLs, and ClusterClient and RedisStore on real clusters of
// redis-server processes (3 masters, 3 replicas) on loopback. The conformance and exactness
// suites of the store run on the shared cluster too (this binary links them with
// cluster_target.cc). ClusterUnderChange moves slots and fails masters over while checks run.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_target.h"
#include "redis/cluster_client.h"
#include "redis/cluster_slots.h"
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

// A single-node client per port, to see where keys are.
std::unique_ptr<redis::Client> NodeClient(int port) {
  redis::ClientOptions options;
  options.port = port;
  options.timeout = 5s;
  options.connect_timeout = 5s;
  auto client = redis::Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

std::unique_ptr<ClusterClient> ConnectCluster(const RedisCluster& cluster,
                                              Duration refresh_interval = 2s) {
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
    client_ = ConnectCluster(*cluster_);
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(client_->connected());
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
  for (int port : cluster_->MasterPorts()) nodes[port] = NodeClient(port);
  ASSERT_EQ(nodes.size(), 3u);
  std::map<int, int> keys_on;
  for (int i = 0; i < 60; ++i) {
    const std::string key = prefix_ + std::to_string(i);
    const std::string_view set[] = {"SET", key, "v"};
    auto r = client_->CommandSync(set);
    ASSERT_TRUE(r.ok() && !r->is_error()) << (r.ok() ? r->str : r.status().ToString());
    const int master = cluster_->MasterOfSlot(KeySlot(key));
    EXPECT_EQ(client_->MasterOf(KeySlot(key)), "127.0.0.1:" + std::to_string(master));
    const std::string_view exists[] = {"EXISTS", key};
    for (auto& [port, node] : nodes) {
      EXPECT_EQ(node->CommandSync(exists)->integer, port == master ? 1 : 0) << key << " " << port;
    }
    ++keys_on[master];
  }
  EXPECT_EQ(keys_on.size(), 3u) << "keys spread over every master";
  EXPECT_EQ(client_->cluster_stats().moved, 0u);
}

TEST_F(ClusterClientTest, ABatchLeavesInOneWritePerNodeAndComesBackInOrder) {
  const redis::Script script = redis::Script::FromSource(
      "return {redis.call('INCRBY', KEYS[1], ARGV[1]), tonumber(ARGV[1])}");
  std::vector<std::string> keys, amounts;
  for (int i = 0; i < 90; ++i) {
    keys.push_back(prefix_ + "batch" + std::to_string(i));
    amounts.push_back(std::to_string(i));
  }
  std::vector<std::string_view> key_views(keys.begin(), keys.end());
  std::vector<std::string_view> amount_views(amounts.begin(), amounts.end());
  std::vector<redis::ScriptCall> calls;
  for (size_t i = 0; i < keys.size(); ++i) {
    calls.push_back({&script, std::span(&key_views[i], 1), std::span(&amount_views[i], 1)});
  }
  auto run = [&] {
    std::promise<std::vector<Result<redis::Reply>>> done;
    client_->EvalShaBatch(calls, [&](auto results) { done.set_value(std::move(results)); });
    return done.get_future().get();
  };
  run();  // loads the script on every master (NOSCRIPT, then SCRIPT LOAD)
  const redis::ClientStats before = client_->stats();
  const auto results = run();
  const redis::ClientStats after = client_->stats();
  ASSERT_EQ(results.size(), calls.size());
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
    ASSERT_EQ(results[i]->elements.size(), 2u) << results[i]->str;
    EXPECT_EQ(results[i]->elements[0].integer, 2 * static_cast<int64_t>(i));
    EXPECT_EQ(results[i]->elements[1].integer, static_cast<int64_t>(i));
  }
  EXPECT_EQ(after.commands - before.commands, calls.size());
  EXPECT_EQ(after.writes - before.writes, 3u) << "one write per master";
}

TEST_F(ClusterClientTest, KeysInDifferentSlotsAreRefusedBeforeSending) {
  const redis::Script script = redis::Script::FromSource("return 1");
  const std::string a = prefix_ + "a", b = prefix_ + "b";
  ASSERT_NE(KeySlot(a), KeySlot(b));
  const std::string_view keys[] = {a, b};
  const redis::ClientStats before = client_->stats();
  auto r = client_->EvalShaSync(script, keys, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("hash tag"), std::string::npos) << r.status().message();
  EXPECT_EQ(client_->stats().commands, before.commands);

  const std::string tagged_a = "{" + prefix_ + "}a", tagged_b = "{" + prefix_ + "}b";
  const std::string_view tagged[] = {tagged_a, tagged_b};
  auto same_slot = client_->EvalShaSync(script, tagged, {});
  ASSERT_TRUE(same_slot.ok()) << same_slot.status().ToString();
  EXPECT_EQ(same_slot->integer, 1);
}

TEST_F(ClusterClientTest, UnreachableSeedsLeaveItUnavailableNotBroken) {
  redis::ClusterOptions options;
  options.seeds = {"127.0.0.1:" + std::to_string(FreeLoopbackPort())};
  options.node.connect_timeout = 20ms;
  auto client = ClusterClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_FALSE((*client)->connected());
  const std::string_view get[] = {"GET", "k"};
  auto r = (*client)->CommandSync(get);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();

  options.node.timeout = Duration(0);
  EXPECT_EQ(ClusterClient::Create(options).status().code(), StatusCode::kInvalidArgument);
}

// CheckAll on a cluster: limits of one key share its hash tag, so one slot; across keys it is
// refused before anything is sent.
class ClusterStoreTest : public RedisStoreTest {};

TEST_F(ClusterStoreTest, CheckAllOnOneKeyWorksAcrossKeysIsRefused) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit per_second = *Limit::Create(Algorithm::kGcra, 2, 1s);
  const Limit per_day = *Limit::Create(Algorithm::kFixedWindow, 3, 24h);
  const std::vector<CheckRequest> tenant = {
      {.scope = "per-second", .limit = &per_second, .key = "tenant:42"},
      {.scope = "per-day", .limit = &per_day, .key = "tenant:42"}};
  for (int i = 0; i < 3; ++i) {
    auto all = store->CheckAll(tenant);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ((*all)[0].allowed && (*all)[1].allowed, i < 2) << "check " << i;
  }
  RedisCluster* cluster = SharedCluster();
  const int holder = cluster->MasterOfSlot(KeySlot("tenant:42"));
  for (const auto& key : store->KeysOf("per-day", "tenant:42")) {
    EXPECT_EQ(KeySlot(key), KeySlot("tenant:42"));
  }
  EXPECT_EQ(cluster->Cli(holder, {"EXISTS", store->KeysOf("per-day", "tenant:42")[0]}), "1");

  const std::vector<CheckRequest> two_keys = {
      {.scope = "per-second", .limit = &per_second, .key = "tenant:7"},
      {.scope = "per-day", .limit = &per_day, .key = "tenant:8"}};
  auto refused = store->CheckAll(two_keys);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("hash tag"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(Scan(prefix_ + "*tenant:7*").empty());
  EXPECT_TRUE(Scan(prefix_ + "*tenant:8*").empty());
}

}  // namespace
}  // namespace sluice::testing
