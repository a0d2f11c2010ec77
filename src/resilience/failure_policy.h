// What decides a request while its store is out (an outage, IsStoreOutage, or its circuit
// breaker open): the request's failure policy (CheckRequest::on_error). fail_open admits;
// fail_closed denies, with retry_after `open_for`; local_fallback decides on an in-process
// MemoryStore with this process's share of the limit (LocalShare), booking on it as the store
// would. Every decision names its policy as its source and reports the rule's own limit.
// CheckAll's requests are decided together, all or nothing (DecideAll).
//
// Thread safety: fully thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/memory_store.h"
#include "sluice/resilient_store.h"
#include "sluice/store.h"

namespace sluice::resilience {

// The limit one of `instances` processes may admit on its own: the count, and a meter's burst,
// divided among them, at least 1 each.
Result<Limit> LocalShare(const Limit& limit, int64_t instances);

class FailurePolicies {
 public:
  // Uses the options' instances, open_for and fallback_max_keys; `clock` is the local fallback's.
  FailurePolicies(const ResilientStoreOptions& options, const Clock& clock);

  // `request` decided by its policy.
  Decision Decide(const CheckRequest& request);
  // CheckAll's requests decided by their policies, all or nothing: a fail_closed request denies
  // them all, the local_fallback ones are decided together on the local fallback (each with its
  // share of the limit), the fail_open ones admit. The local fallback consumes only if all admit.
  std::vector<Decision> DecideAll(std::span<const CheckRequest> requests);

  // Forgets the key on the local fallback (its state there is this process's estimate only).
  void Forget(std::string_view scope, std::string_view key);

 private:
  // fail_closed's decision.
  Decision Closed(const Limit& limit) const;

  const int64_t instances_;
  const Duration open_for_;
  MemoryStore fallback_;
};

}  // namespace sluice::resilience
