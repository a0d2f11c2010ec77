// The store suites' target in the cluster test binary: a 3-master Redis Cluster.
#include "cluster_target.h"

#include "redis/cluster_slots.h"
#include "store_test_support.h"

namespace sluice::testing {

RedisCluster* SharedCluster() {
  static std::unique_ptr<RedisCluster> cluster = RedisCluster::Start();
  return cluster.get();
}

const RedisTarget* SharedTarget() {
  RedisCluster* cluster = SharedCluster();
  if (cluster == nullptr) return nullptr;
  static const RedisTarget target{
      cluster->url(), cluster->MasterPorts(),
      [cluster](std::string_view tag) { return cluster->MasterOfSlot(redis::KeySlot(tag)); }};
  return &target;
}

}  // namespace sluice::testing
