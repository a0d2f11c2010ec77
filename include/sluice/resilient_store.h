// ResilientStore: keeps a limiter answering when its shared store (Redis) is slow, hung or gone.
// It wraps a backend store and adds, in front of it:
//   - a hot-key cache: a key the backend just denied is denied locally, for requests at least as
//     large, until its retry_after passes, without a round trip. It only ever denies, so it can
//     never admit more than the limit;
//   - a circuit breaker: after `failures_to_open` consecutive backend failures it opens and every
//     decision goes straight to the failure policy, with no network, for `open_for`; then one
//     probe goes through, and a success closes it;
//   - the request's failure policy (CheckRequest::on_error) whenever the backend fails (an
//     UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED or INTERNAL error) or the breaker is
//     open: fail open, fail closed, or decide on an in-process MemoryStore with the limit divided
//     by `instances`. Decision::source says which path decided.
// The backend's own deadline bounds every call (the Redis client's timeout); nothing is retried.
//
// Thread safety: fully thread-safe. The backend must outlive this store.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/store.h"

namespace sluice {

enum class BreakerState : uint8_t { kClosed, kOpen, kHalfOpen };
const char* BreakerStateName(BreakerState state);  // "closed", "open", "half_open"

struct ResilientStoreOptions {
  // Time for the breaker, the hot-key cache and the local fallback; the system clock when null.
  const Clock* clock = nullptr;
  int failures_to_open = 5;
  Duration open_for = std::chrono::milliseconds(500);
  // How many processes share the limits: local_fallback gives each limit/instances (at least 1).
  int64_t instances = 1;
  // Keys the hot-key cache may hold; 0 turns it off.
  size_t hot_key_capacity = 100'000;
  // Keys the local fallback may hold.
  size_t fallback_max_keys = 1'000'000;
};

struct ResilientStoreStats {
  uint64_t store = 0;  // decisions by source
  uint64_t hot_key_cache = 0;
  uint64_t fail_open = 0;
  uint64_t fail_closed = 0;
  uint64_t local_fallback = 0;
  uint64_t store_errors = 0;   // backend failures seen (not counting calls the breaker stopped)
  uint64_t breaker_opens = 0;  // times the breaker opened
  BreakerState breaker = BreakerState::kClosed;
};

class ResilientStore final : public Store {
 public:
  ResilientStore(Store& backend, ResilientStoreOptions options = {});
  ~ResilientStore() override;

  ResilientStoreStats stats() const;
  BreakerState breaker_state() const;
  // A readiness probe: sends `probe` (a peek, cost 0) to the backend if the breaker lets a call
  // through, and answers with the backend's own result, errors included (no failure policy);
  // while the breaker is open it answers UNAVAILABLE at once, without a network call. The
  // outcome counts for the breaker like any call, so with no traffic at all, probes are what
  // close it again once the backend recovers.
  void ProbeAsync(const CheckRequest& probe, DecisionCallback done);

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override;
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override;
  Result<Decision> DoCheck(const CheckRequest& request) override;
  Status DoReset(std::string_view scope, std::string_view key) override;

 private:
  class Breaker;
  class HotKeys;
  struct OwnedRequest;

  bool UsesCache(const CheckRequest& request) const;
  std::optional<Decision> FromCache(const CheckRequest& request, int64_t now);
  // Updates the breaker and the error count with a backend answer; true if it is a store
  // failure (for the failure policy to decide).
  bool Observe(const Result<Decision>& answer);
  // The backend's answer to one request, with the breaker and the cache updated; a backend
  // failure becomes the request's failure policy.
  Result<Decision> Settle(const CheckRequest& request, Result<Decision> answer);
  Result<Decision> ApplyPolicy(const CheckRequest& request);
  void Count(const Result<Decision>& result);
  int64_t Now() const;

  Store& backend_;
  const ResilientStoreOptions options_;
  const Clock& clock_;
  std::unique_ptr<Breaker> breaker_;
  std::unique_ptr<HotKeys> hot_keys_;
  MemoryStore fallback_;
  std::atomic<uint64_t> by_source_[5] = {};
  std::atomic<uint64_t> store_errors_{0};
};

}  // namespace sluice
