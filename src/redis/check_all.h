// Store::CheckAll on Redis (RedisStore's), for keys on any nodes. The checks are grouped by the
// node that holds their keys (Client::NodeIdOf: one group on one Redis) and each group is decided
// by one check_all.lua call (src/redis/script_call.h), which reaches keys of several slots of
// its node through the script flag allow-cross-slot-keys.
//   - One node: one call in 'charge' mode, all or nothing, atomic.
//   - Several nodes: first every node's call in 'peek' mode, in parallel, which writes nothing.
//     If any check refuses, that is the answer and nothing was consumed. If all admit, every
//     node's call in 'charge' mode, in parallel. A node that now refuses (its keys were consumed
//     by others since the peek) consumes nothing, while the other nodes have consumed their
//     checks' costs: the request is reported refused, those nodes' checks as refused with
//     retry_after 0 and their state after the charge. Under-admission, never over-admission:
//     each node admits only what its limits allow.
// Every call has the one deadline fixed when CheckAll starts, and none is retried. On a Redis
// Cluster, a call whose keys span slots does not follow ASK (see CallOptions::cross_slot).
//
// Thread safety: the callback runs once, on a client I/O thread or inline on a refusal.
#pragma once

#include <span>

#include "redis/client.h"
#include "redis/script_call.h"
#include "sluice/store.h"

namespace sluice::redis {

void CheckAllAsync(Client& client, const CheckContext& context, Duration timeout,
                   std::span<const CheckRequest> requests, AllCallback done);

}  // namespace sluice::redis
