// The slot map of a ClusterClient: the masters it knows, each with its single-node Client, and
// the master of each slot. Immutable once published (see cluster_refresh.cc), so any thread may
// read a snapshot without a lock.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/client.h"
#include "redis/cluster_slots.h"

namespace sluice::redis::cluster {

inline constexpr uint16_t kNoNode = UINT16_MAX;

struct Node {
  std::string address;  // host:port
  std::unique_ptr<Client> client;
};

struct SlotMap {
  std::array<uint16_t, kClusterSlots> master;  // index into nodes, or kNoNode
  std::vector<std::shared_ptr<Node>> nodes;

  SlotMap() { master.fill(kNoNode); }

  // The master of `slot`; for -1, any master.
  Node* Serving(int slot) const {
    if (slot < 0) return nodes.empty() ? nullptr : nodes.front().get();
    const uint16_t i = master[slot];
    return i == kNoNode ? nullptr : nodes[i].get();
  }

  std::shared_ptr<Node> Find(std::string_view address) const {
    for (const auto& node : nodes) {
      if (node->address == address) return node;
    }
    return nullptr;
  }
};

}  // namespace sluice::redis::cluster
