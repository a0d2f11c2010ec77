// Limiter: one named limit enforced over a Store. The name scopes its keys, so several limiters
// (say "login" at 5/min and "api" at 100/s) can share one store and even one key space.
//
//   sluice::MemoryStore store;
//   auto limit = sluice::Limit::Create(sluice::Algorithm::kGcra, 100, std::chrono::seconds(1));
//   sluice::Limiter api(store, "api", *limit);
//   auto decision = api.Check("user:42");
//   if (decision.ok() && !decision->allowed) { /* 429, Retry-After: decision->retry_after */ }
//
// Thread safety: a Limiter is immutable after construction; all methods may be called
// concurrently. The store must outlive the limiter.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

struct KeyCost {
  std::string_view key;
  int64_t cost = 1;
  // Above zero: a reservation (see Reserve).
  Duration max_delay{0};
};

class Limiter {
 public:
  // `on_error` applies when the store is a ResilientStore and its backend fails; `lease` when it
  // is (or sits on) a LeasingStore.
  Limiter(Store& store, std::string name, Limit limit,
          FailurePolicy on_error = FailurePolicy::kFailOpen, LeaseTerms lease = {});

  // The request this limiter's checks make for `key`: its name as the scope, its limit and its
  // failure policy, with `cost` and `max_delay` (see CheckRequest), and its lease terms unless it
  // books (max_delay above zero). Every check of a limit is
  // built here, the methods below and the callers that hand requests to a Store themselves
  // alike: several limiters' requests in one Store::CheckBatch or Store::CheckAll. Nothing is
  // validated (the store does, as ValidateCheck). The request points into this limiter and
  // `key`: both must outlive its use.
  CheckRequest Request(std::string_view key, int64_t cost, Duration max_delay = Duration(0)) const;

  // Admits `cost` units for `key` if the limit allows, consuming them; a denial consumes
  // nothing. Cost 0 peeks. Errors: INVALID_ARGUMENT (empty or over-long key, negative cost),
  // COST_EXCEEDS_LIMIT (cost above capacity()), and the store's own (e.g. UNAVAILABLE).
  Result<Decision> Check(std::string_view key, int64_t cost = 1) const;
  void CheckAsync(std::string_view key, int64_t cost, DecisionCallback done) const;
  // As Check, but a request that does not fit now and would within `max_delay` books its slot
  // and is allowed with Decision::delay, the wait before it may proceed (store.h, Reservations).
  // token_bucket, leaky_bucket and gcra only (IsMeter); INVALID_ARGUMENT for the others.
  Result<Decision> Reserve(std::string_view key, int64_t cost, Duration max_delay) const;
  void ReserveAsync(std::string_view key, int64_t cost, Duration max_delay,
                    DecisionCallback done) const;
  // Several keys at once, decided in order; one round trip on a remote store.
  std::vector<Result<Decision>> CheckBatch(std::span<const KeyCost> checks) const;
  void CheckBatchAsync(std::span<const KeyCost> checks, BatchCallback done) const;
  // Forgets the key's state.
  Status Reset(std::string_view key) const;

  const std::string& name() const { return name_; }
  const Limit& limit() const { return limit_; }
  FailurePolicy on_error() const { return on_error_; }
  const LeaseTerms& lease() const { return lease_; }

 private:
  std::vector<CheckRequest> Requests(std::span<const KeyCost> checks) const;

  Store& store_;
  std::string name_;
  Limit limit_;
  FailurePolicy on_error_;
  LeaseTerms lease_;
};

}  // namespace sluice
