// StoreHealth: what a store that keeps itself answering tells of its health, for readiness
// and metrics: its circuit breakers (one per failure domain, Store::FailureDomain) and how many
// decisions each path made. ResilientStore implements it; a plain store (MemoryStore,
// RedisStore) has none, and the HTTP layer then reports no breaker.
//
// Thread safety: every method may be called concurrently, from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

enum class BreakerState : uint8_t { kClosed, kOpen, kHalfOpen };
const char* BreakerStateName(BreakerState state);  // "closed", "open", "half_open"

// One failure domain's circuit breaker.
struct DomainBreakerStats {
  std::string domain;  // Store::FailureDomainName of the first domain that used the breaker
  BreakerState state = BreakerState::kClosed;
  uint64_t opens = 0;
};

struct StoreHealthStats {
  uint64_t store = 0;  // decisions by source (DecisionSource)
  uint64_t hot_key_cache = 0;
  uint64_t fail_open = 0;
  uint64_t fail_closed = 0;
  uint64_t local_fallback = 0;
  uint64_t store_errors = 0;   // backend failures seen (not counting calls a breaker stopped)
  uint64_t breaker_opens = 0;  // times a breaker opened, summed over the domains
  BreakerState breaker = BreakerState::kClosed;  // the worst: open, then half_open, then closed
  std::vector<DomainBreakerStats> breakers;      // the domains that have seen a request
};

class StoreHealth {
 public:
  virtual ~StoreHealth() = default;

  virtual StoreHealthStats stats() const = 0;
  // The worst state over the domains (as StoreHealthStats::breaker).
  virtual BreakerState breaker_state() const = 0;
};

}  // namespace sluice
