// What an error reply from Redis means, by its first word (the error code Redis puts there, also
// at the head of a script's error since Redis 7.0). Three kinds, for three different answers:
//   - the store is out (UNAVAILABLE, for the failure policy and the circuit breaker): it cannot
//     serve any call now, and will again by itself: LOADING, BUSY, MASTERDOWN, CLUSTERDOWN,
//     TRYAGAIN, READONLY (a failed-over master, now a replica), MISCONF, NOREPLICAS, a MOVED or
//     ASK not followed, a NOSCRIPT left after the client's one reload;
//   - the store is full (RESOURCE_EXHAUSTED): OOM, maxmemory reached with a policy that does not
//     evict. Refused (503 with Retry-After), never for a failure policy: a client that can fill
//     Redis must not be able to switch fail_open limits into admissions;
//   - a fault of the call or of its keys (INTERNAL): WRONGTYPE (a key holding another type than
//     the script keeps there), a script failing ("ERR ..."), and any code not listed above.
//     Refused (500) for that call alone: it neither reaches a failure policy nor moves a breaker.
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

#include "sluice/status.h"

namespace sluice::redis {

// The status of Redis's error reply `message` to a `call` ("check", "give-back", "DEL").
Status ErrorReplyStatus(std::string_view message, std::string_view call);

}  // namespace sluice::redis
