// A Redis Cluster for integration tests: masters and their replicas, each a RedisServer (free
// loopback port, persistence off, its own temporary directory holding its cluster config file)
// with cluster-enabled yes, joined by `redis-cli --cluster create` and waited for until every
// node reports cluster_state:ok. Destroying it kills every node (SIGKILL) and removes their
// directories. Helpers move a slot between masters step by step, fail a master over to its
// replica, and kill nodes. Every wait is bounded.
// Not thread-safe; one owner.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace sluice::testing {

class RedisCluster {
 public:
  // Returns null, after printing why, if the cluster cannot be started or does not become
  // healthy within 30 s.
  static std::unique_ptr<RedisCluster> Start(int masters = 3, int replicas_per_master = 1);

  // redis+cluster:// naming every node as a seed.
  std::string url() const;
  // Every node started, dead ones included.
  std::vector<int> ports() const;
  // The live masters that serve slots, as the cluster sees them now.
  std::vector<int> MasterPorts() const;
  // The master serving `slot` now; 0 when none does.
  int MasterOfSlot(int slot) const;
  // A live replica of the master on `master_port`; 0 when it has none.
  int ReplicaOf(int master_port) const;
  // redis-cli against one node; its raw output.
  std::string Cli(int port, const std::vector<std::string>& args) const;

  // Moving `slot` to the master on `to_port`, in the three steps of a live resharding, so a test
  // can run load between them: mark it IMPORTING on the target and MIGRATING on the source; then
  // MIGRATE its keys in batches; then assign it to the target on every master. Each returns false
  // (after printing why) on failure.
  bool BeginSlotMigration(int slot, int to_port);
  bool MigrateSlotKeys(int slot);
  bool EndSlotMigration(int slot);
  // Between the first two steps: MIGRATE only these keys of the slot being moved, leaving it half
  // migrated (a script's keys can then be on both sides).
  bool MigrateKeys(const std::vector<std::string>& keys);

  // CLUSTER FAILOVER on the replica on `replica_port`; waits (up to 15 s) until it is a master
  // and the cluster is healthy.
  bool Failover(int replica_port);
  // kill -9 of a node.
  void Kill(int port);
  // Starts one more node and joins it to the cluster as a master serving no slots (redis-cli
  // --cluster add-node); its port, or 0 (after printing why).
  int AddMaster();
  // Takes a node serving no slots out of the cluster (redis-cli --cluster del-node), then kills
  // it.
  bool RemoveNode(int port);
  // True once every live node reports cluster_state:ok, every live replica is in sync with its
  // master, and `masters` live masters serve slots, within `timeout`.
  bool WaitHealthy(std::chrono::milliseconds timeout, int masters);

 private:
  struct NodeLine;
  RedisCluster() = default;
  std::vector<NodeLine> Nodes() const;
  const RedisServer* Server(int port) const;
  std::string IdOf(int port) const;
  bool Migrate(const std::vector<std::string>& keys);
  // True once the cluster's view (Nodes()) lists `replicas` live replicas of live masters, within
  // `timeout`: a replica in sync may still be unknown to the other nodes' gossip for a moment.
  bool WaitReplicasKnown(std::chrono::milliseconds timeout, int replicas) const;

  std::vector<std::unique_ptr<RedisServer>> servers_;
  int masters_ = 0;
  struct Migration {
    int slot = -1;
    int from = 0;
    int to = 0;
  } migration_;
};

}  // namespace sluice::testing
