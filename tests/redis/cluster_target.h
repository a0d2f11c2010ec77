// The Redis Cluster the cluster test binary shares: 3 masters, 3 replicas, started on first use
// and stopped at exit. The store suites run on it through SharedTarget(); tests that change the
// cluster's shape start clusters of their own.
#pragma once

#include "support/redis_cluster.h"

namespace sluice::testing {

// Null (after printing why) if it cannot start.
RedisCluster* SharedCluster();

}  // namespace sluice::testing
