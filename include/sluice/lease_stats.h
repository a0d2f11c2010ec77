// LeaseStats: what a store that decides from leases (LeasingStore) tells of them, for metrics.
// LeaseReport is the interface the HTTP layer reads them through.
//
// Thread safety: every method may be called concurrently, from any thread.
#pragma once

#include <cstdint>

namespace sluice {

struct LeaseStats {
  uint64_t taken = 0;           // leases taken from the store
  uint64_t units_taken = 0;     // units those leases consumed in the store
  uint64_t units_used = 0;      // units admitted from leases in this process
  uint64_t units_returned = 0;  // unused units given back to the store
  uint64_t units_lapsed = 0;    // unused units neither used nor given back when their lease ended
  uint64_t refusals = 0;        // checks refused here because the store had no lease to give
  uint64_t held = 0;            // keys with a lease or a refusal held now
};

class LeaseReport {
 public:
  virtual ~LeaseReport() = default;
  virtual LeaseStats lease_stats() const = 0;
};

}  // namespace sluice
