// ClusterClient: the redis::Client interface over a Redis Cluster. It learns the slot map
// (CLUSTER SLOTS) from the seed nodes, keeps one single-node Client (Client::Create: multiplexed,
// auto-pipelined) per master, all on one set of I/O threads (io_threads.h), and sends each call to
// the master of its keys' slot; a batch leaves as one write per node and its results come back in
// the caller's order.
//
// Redirections: MOVED refreshes the slot map (at most one refresh at a time, and not more often
// than every refresh_min_gap) and sends the call once more to the node named; ASK sends ASKING
// and the call once to the node named. Both keep the call's original deadline. A redirection to
// a node not connected yet fails the call with UNAVAILABLE while a connection is made; TRYAGAIN,
// CLUSTERDOWN, a second redirection and calls for slots no master serves fail with UNAVAILABLE
// too: the deadline and the caller's failure policy deal with them, no call is retried in a loop.
// Coalesced checks (EvalShaCoalesced) share a call per master, across slots (CoalescibleCall::
// across_slots); when that call is redirected or refused (a slot moved or migrates), each check is
// sent once more in a call of its own, which follows its own redirection.
// The slot map is also refreshed every refresh_interval, and after a node fails, so masters that
// come, go or fail over are followed without a restart.
//
// Thread safety: as redis::Client. A refresh thread of its own does the blocking work (CLUSTER
// SLOTS, connecting to new masters).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "redis/client.h"
#include "redis/cluster_slots.h"
#include "redis/io_threads.h"

namespace sluice::redis {

struct ClusterOptions {
  // "host:port" of nodes to learn the cluster from; any one that answers is enough.
  std::vector<std::string> seeds;
  // For each node's Client: credentials, deadlines, connections, bounds (host and port are the
  // node's; db must be 0). io_threads is the number of I/O threads all the nodes share.
  // Over TLS, each node (seeds included) is verified against its own host when that is a name
  // (a cluster announcing hostnames, cluster-preferred-endpoint-type hostname), else against
  // node.tls_server_name when set, else against its IP address.
  ClientOptions node;
  Duration refresh_interval = std::chrono::seconds(2);
  Duration refresh_min_gap = std::chrono::milliseconds(100);
};

namespace cluster {
struct Node;
struct SlotMap;
struct Call;
}  // namespace cluster

struct ClusterStats {
  uint64_t refreshes = 0;  // slot maps fetched
  uint64_t moved = 0;      // MOVED replies
  uint64_t asked = 0;      // ASK replies
  size_t nodes = 0;        // nodes connected to in the current map
};

class ClusterClient final : public Client {
 public:
  // Fetches the slot map and connects to the masters, waiting up to connect_timeout for each; a
  // cluster that cannot be reached then is retried in the background. Fails only on bad options.
  static Result<std::unique_ptr<ClusterClient>> Create(ClusterOptions options);
  ~ClusterClient() override;

  using Client::Command;
  using Client::EvalSha;
  // Sent to the master of argv[1]'s slot; a command of one word to any master.
  void Command(std::span<const std::string_view> argv, const CallOptions& options,
               ReplyCallback done) override;
  // Sent to the master of the keys' slot. Keys in different slots are refused
  // (INVALID_ARGUMENT) before anything is sent: Redis Cluster refuses them too. A script that
  // reaches other keys by name (CallOptions::cross_slot) fails with UNAVAILABLE when one is not on
  // that master, as on TRYAGAIN.
  void EvalSha(const Script& script, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, const CallOptions& options,
               ReplyCallback done) override;
  // As EvalSha, coalescing with the checks queued on the connection to the master of its slot,
  // whatever their slots.
  void EvalShaCoalesced(const CoalescibleCall& call, const CallOptions& options,
                        ReplyCallback done) override;
  // Each node's share of the batch, in order, to its client's EvalShaCoalescedBatch across
  // slots; redirections as EvalShaCoalesced.
  void EvalShaCoalescedBatch(std::span<const CoalescibleCall> calls,
                             BatchReplyCallback done) override;
  void EvalShaBatch(std::span<const ScriptCall> calls, BatchReplyCallback done) override;

  // A small id of the master serving `slot` in the current map, for telling masters apart
  // cheaply (one atomic load, no lock): each address gets the next id, from 1, when it first
  // appears in a map, keeps it, and no other address ever gets it. 0 while no master is known.
  uint32_t NodeIdOf(uint16_t slot) const override;
  // The address `id` was given to; empty for 0 and for ids not given yet.
  std::string AddressOf(uint32_t id) const override;

  Status Connected() const override;
  // Summed over the nodes' clients, those of nodes that left the cluster included.
  ClientStats stats_for_testing() const override;
  ClusterStats cluster_stats_for_testing() const;
  // "host:port" of the master serving `slot` in the current map; empty when none is known.
  std::string MasterOfForTesting(uint16_t slot) const;

 private:
  using Node = cluster::Node;
  using SlotMap = cluster::SlotMap;
  using Call = cluster::Call;

  explicit ClusterClient(ClusterOptions options);

  std::shared_ptr<const SlotMap> Map() const;
  // EvalSha of a check that coalesces when `many` is set (CoalescibleCall).
  void EvalSha(const Script& script, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, const CallOptions& options,
               ReplyCallback done, const Script* many, size_t own_arg);
  // A batch, each node's share sent together: coalesced when the calls have `many`, else as
  // separate script calls.
  void SendBatch(std::span<const CoalescibleCall> calls, BatchReplyCallback done);
  void Send(std::shared_ptr<Call> call, const CallOptions& options);
  void SendTo(Node& node, std::shared_ptr<Call> call, const CallOptions& options);
  void Unserved(Call& call, int slot);
  void OnReply(const Node& from, const std::shared_ptr<Call>& call, Result<Reply> reply);
  void Redirected(const std::shared_ptr<Call>& call, const Redirect& redirect);
  // A coalesced check whose call was redirected or refused, once more in a call of its own, to
  // the master of its slot, which serves or redirects it.
  void SendAlone(const std::shared_ptr<Call>& call);
  void RequestRefresh();

  // Refresh thread.
  void RefreshLoop();
  // Fails only on bad options (a node's Client refusing them); a cluster out of reach leaves
  // the map as it was.
  Status Refresh();
  void CloseUnused();
  uint32_t IdOf(const std::string& address);

  const ClusterOptions options_;
  // The nodes' clients' I/O threads (node.io_threads of them), shared; destroyed after the nodes.
  const std::shared_ptr<IoThreads> io_threads_;

  mutable base::Mutex mu_;
  std::shared_ptr<const SlotMap> map_ SLUICE_GUARDED_BY(mu_);
  // Addresses named by redirections, to connect to.
  std::vector<std::string> wanted_ SLUICE_GUARDED_BY(mu_);
  bool refresh_requested_ SLUICE_GUARDED_BY(mu_) = false;
  bool stopping_ SLUICE_GUARDED_BY(mu_) = false;
  std::condition_variable wake_;
  // Redirections in progress; the destructor waits for them before closing the nodes.
  int redirecting_ SLUICE_GUARDED_BY(mu_) = 0;
  std::condition_variable redirected_;

  std::atomic<uint64_t> refreshes_{0}, moved_{0}, asked_{0};
  mutable base::Mutex stats_mu_;
  ClientStats retired_stats_ SLUICE_GUARDED_BY(stats_mu_);  // of nodes' clients closed since

  std::vector<std::shared_ptr<Node>> retired_;  // refresh thread only: left the map, not closed

  // NodeIdOf's answers, written after each new map is published.
  std::unique_ptr<std::atomic<uint32_t>[]> node_ids_;
  mutable base::Mutex ids_mu_;
  std::vector<std::string> addresses_ SLUICE_GUARDED_BY(ids_mu_);  // id - 1 -> address

  std::thread refresher_;
};

}  // namespace sluice::redis
