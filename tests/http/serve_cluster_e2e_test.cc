// `sluice serve` on a Redis Cluster, as a user runs it: the real binary (its path is the first
// argument of this test program) with `--store redis+cluster://...`, on a real 3-master cluster,
// spoken to over HTTP. Limits hold across requests, the state of keys spread over every
// master, and readiness reflects the cluster.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/redis_cluster.h"
#include "support/serve_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::Service;

TEST(ServeClusterE2ETest, DecidesOnTheClusterWithStateOnEveryMaster) {
  auto cluster = sluice::testing::RedisCluster::Start();
  ASSERT_NE(cluster, nullptr);

  Service service("rules:\n  - {name: api, algorithm: gcra, limit: 3, period: 1m}\n", "memory://",
                  "timeout_ms: 200", {"--store", cluster->url()});
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;

  // 30 keys, each checked 4 times: 3 admitted, then refused, all decided by the cluster.
  for (int k = 0; k < 30; ++k) {
    const std::string body = R"({"rule":"api","key":"tenant-)" + std::to_string(k) + R"("})";
    for (int i = 0; i < 4; ++i) {
      auto r = client.Post("/v1/check", body, "application/json");
      ASSERT_TRUE(r) << "no answer";
      ASSERT_EQ(r->status, 200) << r->body;
      const json decision = json::parse(r->body);
      EXPECT_EQ(decision["allowed"], i < 3) << "key " << k << " check " << i << ": " << r->body;
      EXPECT_EQ(decision["source"], "store") << r->body;
    }
  }
  std::set<int> holding;
  for (int master : cluster->MasterPorts()) {
    const std::string keys = cluster->Cli(master, {"KEYS", "sluice:api:*"});
    if (keys.find("tenant-") != std::string::npos) holding.insert(master);
  }
  EXPECT_EQ(holding.size(), 3u) << "the keys' state spreads over every master";

  EXPECT_EQ(service.process().Stop(10s), 0) << service.process().Log();
}

}  // namespace
