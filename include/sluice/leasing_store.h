// LeasingStore: decides the checks of hot keys in this process, from units taken ahead from a
// shared store. For a check whose request carries LeaseTerms (CheckRequest::lease), it takes a
// lease: one check of `units` on the backend, which consumes them there first, so that whatever
// this process admits from the lease was already counted by the shared store and leases can
// never admit more than the limit. The next checks of the key are then admitted from the lease
// with no call, until it is used up or ends:
//   - a lease ends `lifetime` after it was asked for, and for fixed_window also when the window
//     it was counted in ends;
//   - when a lease of a meter (token_bucket, leaky_bucket, gcra) ends with units unused, they are
//     given back to the backend (Store::GiveBack), less a unit per emission interval of the
//     lease's age (from when it was asked for to `store_timeout` after the give-back is sent):
//     what the meter's refill may have wasted meanwhile, had the lease not been taken, which
//     giving back would return a second time. A give-back the backend applies later than that
//     (a Redis that was stopped) returns a unit less per emission interval past it, by the
//     backend's clock (Store::GiveBack's apply_by): a late give-back returns less, never more.
//     A fixed_window's unused units lapse with their window.
// When the backend cannot give a whole lease, the check is decided by what it has: when that
// covers the check, a second call takes it as a smaller lease, within the first call's deadline
// (a check still waiting `store_timeout` after the first call was sent is answered
// DEADLINE_EXCEEDED, for its failure policy, and what the second call brings serves the next
// checks); otherwise the check is refused, and so are the key's next ones, here, until the
// backend's retry_after for a whole lease has passed. So what another process holds unused, at most
// `units` per process, can be refused to this one for up to `lifetime` (or to the end of a fixed
// window); a meter gets it back at the end of the lease. Reported remaining is what this process's
// lease has left. Checks without lease terms, peeks (cost 0), reservations (max_delay), checks
// costing more than a lease, CheckAll and Reset go to the backend (Reset also forgets the key's
// lease here: its unused units go with the key's state, and so does what a take in flight brings).
// A lease never outlives the LeasingStore: what is unused when it is destroyed is given back, or
// lapses.
//
// Thread safety: fully thread-safe. Callbacks run on the backend's threads, on the timers'
// threads or inline. The backend and the timers must outlive this store.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "sluice/lease_stats.h"
#include "sluice/store.h"
#include "sluice/timers.h"

namespace sluice {
namespace lease {
class LeaseTable;
}  // namespace lease

struct LeasingStoreOptions {
  // Keys holding a lease (or a refusal) at once; past it, checks of other keys go to the backend
  // one by one until a lease ends.
  size_t max_keys = 100'000;
  // The backend's deadline: how long after it is sent a give-back counts the lease's age up to
  // (the backend returns less when it applies it later), and the longest a leased check waits
  // for the backend's calls.
  Duration store_timeout = std::chrono::milliseconds(50);
};

class LeasingStore final : public Store, public LeaseReport {
 public:
  // Leases are timed on `timers` (their clock is this store's).
  LeasingStore(Store& backend, Timers& timers, LeasingStoreOptions options = {});
  ~LeasingStore() override;

  LeaseStats lease_stats() const override;

  // The backend's.
  uint32_t FailureDomain(std::string_view scope, std::string_view key) const override;
  std::string FailureDomainName(uint32_t domain) const override;
  void ProbeAsync(DecisionCallback done) override;

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override;
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override;
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override;
  void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by, StatusCallback done) override;

 private:
  Store& backend_;
  const std::shared_ptr<lease::LeaseTable> table_;  // shared with its calls and timers
};

}  // namespace sluice
