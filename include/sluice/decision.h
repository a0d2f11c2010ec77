// Decision: the answer to one check: whether it was admitted, what remains, when to retry, when
// more becomes available and when the key is fresh again, and which path decided.
//
// Thread safety: a plain value with no shared state; copies may be used from any thread.
#pragma once

#include <cstdint>

#include "sluice/clock.h"

namespace sluice {

// Which path made a decision. Anything but kStore means the shared store was not consulted.
enum class DecisionSource : uint8_t {
  kStore,          // the store decided
  kHotKeyCache,    // denied locally: the key was known to be over its limit
  kFailOpen,       // the store failed; the failure policy admitted
  kFailClosed,     // the store failed; the failure policy denied
  kLocalFallback,  // the store failed; an in-process limiter decided
};

// "store", "hot_key_cache", "fail_open", "fail_closed", "local_fallback".
const char* DecisionSourceName(DecisionSource source);

struct Decision {
  bool allowed = false;
  // The configured count of the limit (requests per period).
  int64_t limit = 0;
  // Units that could still be admitted right now, after this request.
  int64_t remaining = 0;
  // When denied: the wait after which this same request would be admitted if no other traffic
  // comes. Zero when allowed.
  Duration retry_after{0};
  // The wait until the key's state is back to fresh (full quota); zero if it is fresh already.
  Duration reset_after{0};
  // The wait until more than `remaining` units can be admitted, if no other traffic comes: a
  // request for remaining + 1 units is admitted then, and denied a microsecond earlier. Zero
  // when `remaining` is the whole capacity. This is the RateLimit field's `t`, "the time until
  // additional quota is made available" (draft-ietf-httpapi-ratelimit-headers-10).
  Duration replenish_after{0};
  // When allowed by booking a future slot (a reservation, CheckRequest::max_delay): the wait
  // before the request may proceed; the slot is consumed from now on. Zero otherwise.
  Duration delay{0};
  DecisionSource source = DecisionSource::kStore;

  // True when the store failed and a failure policy decided.
  bool degraded() const {
    return source == DecisionSource::kFailOpen || source == DecisionSource::kFailClosed ||
           source == DecisionSource::kLocalFallback;
  }

  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace sluice
