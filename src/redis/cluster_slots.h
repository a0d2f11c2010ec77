// Redis Cluster's slots, and what its replies say about them: a key's slot, the slot map of
// CLUSTER SLOTS, redirections (MOVED, ASK) and the errors by which it cannot serve a call now.
// Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/resp.h"

namespace sluice::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16 (XMODEM) of the key's hash tag, modulo 16384. The hash tag is what lies between the first
// '{' and the first '}' after it, when that is not empty; otherwise the whole key is hashed.
uint16_t KeySlot(std::string_view key);

// "host" of "host:port".
std::string_view HostOf(std::string_view address);

// Slots [first, last] served by the master at `address` ("host:port").
struct SlotRange {
  int first = 0;
  int last = 0;
  std::string address;

  bool operator==(const SlotRange&) const = default;
};

// The masters in CLUSTER SLOTS' reply; empty if the reply is not one. An empty host is the host of
// the node asked (`asked`, "host:port").
std::vector<SlotRange> ParseSlotRanges(const Reply& reply, std::string_view asked);

// A redirection: MOVED (the slot has a new master) or ASK (this one call, to the node importing
// the slot), to `address`.
struct Redirect {
  bool ask = false;
  std::string address;  // host:port

  bool operator==(const Redirect&) const = default;
};

// "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>"; an empty host is the host of the
// replying node (`from`, "host:port"). Nullopt for any other reply.
std::optional<Redirect> ParseRedirect(const Reply& reply, std::string_view from);

// Why the cluster cannot serve a call now, from its error reply.
enum class ClusterRefusal {
  kNone,
  // TRYAGAIN, or a script's command met it: the keys of one call are split by a slot migration.
  kTryAgain,
  // CLUSTERDOWN, or a script reached a key its node does not serve (its slot moved, or is
  // migrating and the key is gone): the slot map may be stale.
  kMapStale,
};
ClusterRefusal ParseClusterRefusal(const Reply& reply);

}  // namespace sluice::redis
