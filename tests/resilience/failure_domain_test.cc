// Store::FailureDomain on Redis, what ResilientStore keeps a circuit breaker per: one Redis is
// one domain; on a Redis Cluster each master is one (ClusterClient::NodeIdOf), named by its
// address. Against a real redis-server and a real 3-master cluster (no replicas); the cluster's
// faults under load are tests/redis/cluster_test.cc's.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "redis/cluster_client.h"
#include "redis/cluster_slots.h"
#include "redis/url.h"
#include "sluice/redis_store.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using testing::RedisCluster;
using testing::RedisServer;

TEST(ResilientStoreFailureDomains, OneRedisIsOneDomainNamedByItsAddress) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = RedisStore::Create({.url = server->url()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->FailureDomain("api", "a"), 0u);
  EXPECT_EQ((*store)->FailureDomain("login", "b"), 0u);
  EXPECT_EQ((*store)->FailureDomainName(0), "127.0.0.1:" + std::to_string(server->port()));
}

class ResilientStoreClusterDomains : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = RedisCluster::Start(/*masters=*/3, 0).release(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  static RedisCluster* cluster_;
};

RedisCluster* ResilientStoreClusterDomains::cluster_ = nullptr;

TEST_F(ResilientStoreClusterDomains, EachMasterIsADomain) {
  auto store = RedisStore::Create({.url = cluster_->url()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();

  // Keys by the master of their state key's slot, as the cluster sees it.
  std::map<int, std::vector<std::string>> keys_of_master;
  for (int i = 0; i < 64; ++i) {
    const std::string key = "user:" + std::to_string(i);
    const int port = cluster_->MasterOfSlot(redis::KeySlot((*store)->KeysOf("api", key)[0]));
    ASSERT_NE(port, 0);
    keys_of_master[port].push_back(key);
  }
  ASSERT_EQ(keys_of_master.size(), 3u);

  std::map<uint32_t, int> master_of_domain;
  for (const auto& [port, keys] : keys_of_master) {
    ASSERT_GE(keys.size(), 2u);
    const uint32_t domain = (*store)->FailureDomain("api", keys[0]);
    EXPECT_NE(domain, 0u);
    EXPECT_EQ((*store)->FailureDomainName(domain), "127.0.0.1:" + std::to_string(port));
    for (const auto& key : keys) EXPECT_EQ((*store)->FailureDomain("api", key), domain) << key;
    master_of_domain[domain] = port;
  }
  EXPECT_EQ(master_of_domain.size(), 3u);  // three masters, three domains
}

TEST_F(ResilientStoreClusterDomains, NodeIdsNameTheMasterOfEachSlot) {
  auto options = redis::ParseRedisClusterUrl(cluster_->url());
  ASSERT_TRUE(options.ok());
  auto client = redis::ClusterClient::Create(std::move(*options));
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  std::map<uint32_t, std::string> address_of_id;
  for (int slot = 0; slot < redis::kClusterSlots; ++slot) {
    const uint32_t id = (*client)->NodeIdOf(static_cast<uint16_t>(slot));
    ASSERT_NE(id, 0u) << slot;
    ASSERT_EQ((*client)->AddressOf(id), (*client)->MasterOfForTesting(static_cast<uint16_t>(slot)))
        << slot;
    address_of_id[id] = (*client)->AddressOf(id);
  }
  ASSERT_EQ(address_of_id.size(), 3u);
  std::set<std::string> addresses;
  for (const auto& [id, address] : address_of_id) addresses.insert(address);
  EXPECT_EQ(addresses.size(), 3u);
  EXPECT_EQ((*client)->AddressOf(0), "");
  EXPECT_EQ((*client)->AddressOf(4), "");  // not given
}

}  // namespace
}  // namespace sluice
