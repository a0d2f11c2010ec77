// The slot map of a ClusterClient, learnt and followed on its refresh thread.
//
// Design notes. A refresh builds a new map and swaps a shared_ptr under mu_; routing reads a
// snapshot. Nodes are shared between successive maps; one that leaves the map is kept on a list
// of the refresh thread's and closed there once no map snapshot holds it any more, never on an
// I/O thread (a Client cannot be destroyed on its own I/O thread). Each address gets a small id
// (NodeIdOf) when it first appears in a map and keeps it.
#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <charconv>

#include "redis/cluster_client.h"
#include "redis/cluster_map.h"

namespace sluice::redis {
namespace {

using Steady = std::chrono::steady_clock;
using cluster::kNoNode;

Result<std::shared_ptr<cluster::Node>> Connect(const ClientOptions& node_options,
                                               std::shared_ptr<IoThreads> threads,
                                               const std::string& address) {
  ClientOptions options = node_options;
  options.host = std::string(HostOf(address));
  const auto port = std::string_view(address).substr(address.rfind(':') + 1);
  std::from_chars(port.data(), port.data() + port.size(), options.port);
  if (options.tls) {
    boost::system::error_code not_ip;
    boost::asio::ip::make_address(options.host, not_ip);
    if (not_ip || options.tls_server_name.empty()) options.tls_server_name = options.host;
  }
  auto client = Client::Create(std::move(options), std::move(threads));
  if (!client.ok()) return client.status();
  return std::make_shared<cluster::Node>(cluster::Node{address, std::move(*client)});
}

}  // namespace

uint32_t ClusterClient::NodeIdOf(uint16_t slot) const {
  return slot < kClusterSlots ? node_ids_[slot].load(std::memory_order_relaxed) : 0;
}

std::string ClusterClient::AddressOf(uint32_t id) const {
  base::MutexLock lock(ids_mu_);
  return id == 0 || id > addresses_.size() ? std::string() : addresses_[id - 1];
}

uint32_t ClusterClient::IdOf(const std::string& address) {
  base::MutexLock lock(ids_mu_);
  const auto known = std::find(addresses_.begin(), addresses_.end(), address);
  if (known != addresses_.end()) return static_cast<uint32_t>(known - addresses_.begin()) + 1;
  addresses_.push_back(address);
  return static_cast<uint32_t>(addresses_.size());
}

void ClusterClient::RefreshLoop() {
  auto last = Steady::now();
  base::MutexLock lock(mu_);
  while (!stopping_) {
    const auto due =
        last + (refresh_requested_ ? options_.refresh_min_gap : options_.refresh_interval);
    if (Steady::now() < due) {
      lock.WaitUntil(wake_, due);
      continue;
    }
    refresh_requested_ = false;
    last = Steady::now();
    lock.Unlock();
    // A cluster out of reach keeps the map it had; the next refresh tries again (bad options
    // failed Create already).
    (void)Refresh();
    CloseUnused();
    lock.Lock();
  }
}

Status ClusterClient::Refresh() {
  const auto current = Map();
  std::vector<std::string> wanted;
  {
    base::MutexLock lock(mu_);
    wanted.swap(wanted_);
  }
  // Ask the nodes known, then the seeds; keep what was connected for the new map.
  std::vector<std::shared_ptr<Node>> connected;
  // The node at `address`: the current map's, else one connected during this refresh, else a new
  // connection.
  auto node_at = [&](const std::string& address) -> Result<std::shared_ptr<Node>> {
    if (std::shared_ptr<Node> node = current->Find(address)) return node;
    for (const auto& c : connected) {
      if (c->address == address) return c;
    }
    auto fresh = Connect(options_.node, io_threads_, address);
    if (!fresh.ok()) return fresh.status();
    connected.push_back(*fresh);
    return *fresh;
  };
  std::vector<SlotRange> ranges;
  std::vector<std::string> candidates;
  for (const auto& node : current->nodes) candidates.push_back(node->address);
  for (const auto& seed : options_.seeds) {
    if (std::find(candidates.begin(), candidates.end(), seed) == candidates.end()) {
      candidates.push_back(seed);
    }
  }
  for (const auto& address : candidates) {
    auto node = node_at(address);
    if (!node.ok()) return node.status();
    const std::string_view cluster_slots[] = {"CLUSTER", "SLOTS"};
    auto reply = (*node)->client->CommandSync(cluster_slots);
    if (!reply.ok()) continue;
    ranges = ParseSlotRanges(*reply, address);
    if (!ranges.empty()) break;
  }
  if (ranges.empty()) return Status::Unavailable("no Redis Cluster node answered CLUSTER SLOTS");
  refreshes_.fetch_add(1, std::memory_order_relaxed);

  auto next = std::make_shared<SlotMap>();
  auto index_of = [&](const std::string& address) -> Result<uint16_t> {
    for (size_t i = 0; i < next->nodes.size(); ++i) {
      if (next->nodes[i]->address == address) return static_cast<uint16_t>(i);
    }
    auto node = node_at(address);
    if (!node.ok()) return node.status();
    next->nodes.push_back(std::move(*node));
    return static_cast<uint16_t>(next->nodes.size() - 1);
  };
  for (const auto& range : ranges) {
    auto i = index_of(range.address);
    if (!i.ok()) return i.status();
    std::fill(next->master.begin() + range.first, next->master.begin() + range.last + 1, *i);
  }
  for (const auto& address : wanted) {
    if (auto i = index_of(address); !i.ok()) return i.status();
  }
  std::shared_ptr<const SlotMap> previous = next;
  {
    base::MutexLock lock(mu_);
    map_.swap(previous);
  }
  std::vector<uint32_t> ids;
  ids.reserve(next->nodes.size());
  for (const auto& node : next->nodes) ids.push_back(IdOf(node->address));
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    const uint16_t i = next->master[slot];
    node_ids_[slot].store(i == kNoNode ? 0 : ids[i], std::memory_order_relaxed);
  }
  for (const auto& node : previous->nodes) {
    if (next->Find(node->address) == nullptr) retired_.push_back(node);
  }
  return Status::Ok();
}

// Closes the retired nodes no map snapshot holds any more: only retired_ does, and no new
// snapshot can reach them.
void ClusterClient::CloseUnused() {
  std::erase_if(retired_, [this](const std::shared_ptr<Node>& node) {
    if (node.use_count() > 1) return false;
    const ClientStats s = node->client->stats_for_testing();
    base::MutexLock lock(stats_mu_);
    retired_stats_ += s;
    return true;
  });
}

}  // namespace sluice::redis
