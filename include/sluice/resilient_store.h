// ResilientStore: keeps a limiter answering when its shared store (Redis) is slow, hung or gone.
// It wraps a backend store and adds, in front of it:
//   - a hot-key cache: a key the backend just denied is denied locally, for requests of the same
//     cost under the same limit, with the backend's retry_after counted down from when the
//     request was sent, until it passes, without a round trip. It only ever denies, so it can
//     never admit more than the limit;
//   - a circuit breaker per failure domain of the backend (Store::FailureDomain: one for one
//     Redis, one per master of a Redis Cluster): after `failures_to_open` consecutive failures in
//     a domain (a failed batch or CheckAll counts once, however many requests it carried) it opens,
//     and every decision on that domain goes straight to the failure policy, with no network, for
//     `open_for`; then one probe goes through, and its success, and nothing else, closes it: the
//     answer to a call sent before the breaker opened counts for nothing. The probe goes without
//     its lease terms, so that a LeasingStore below cannot answer it from a lease without the
//     store. The other domains go on deciding on the backend. Domain ids below kBreakerSlots get a
//     breaker each; larger ones share one, by id modulo kBreakerSlots;
//   - the request's failure policy (CheckRequest::on_error) whenever the backend is out (an
//     outage, IsStoreOutage: UNAVAILABLE or DEADLINE_EXCEEDED) or the breaker is open: fail
//     open, fail closed, or decide on an in-process MemoryStore with the limit divided by
//     `instances`. Decision::source says which path decided.
// Any other error of the backend, a full store (RESOURCE_EXHAUSTED) or a fault (INTERNAL, such
// as a Lua script's error), comes back as the error, for the caller to refuse: the failure
// policy is for outages only, so that no fault of the store becomes an admission. Such errors
// neither open nor close a breaker. It reports its breakers and what decided (StoreHealth), and
// its readiness probe goes through the breaker (ProbeAsync).
// The backend's own deadline bounds every call (the Redis client's timeout); nothing is retried.
//
// Thread safety: fully thread-safe. The backend must outlive this store.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/store.h"
#include "sluice/store_health.h"

namespace sluice {
namespace resilience {
struct BreakerPass;
class DomainBreakers;
class FailurePolicies;
class HotKeyCache;
}  // namespace resilience

struct ResilientStoreOptions {
  // Time for the breaker, the hot-key cache and the local fallback; the system clock when null.
  const Clock* clock = nullptr;
  int failures_to_open = 5;
  Duration open_for = std::chrono::milliseconds(200);
  // How many processes share the limits: local_fallback gives each limit/instances (at least 1).
  int64_t instances = 1;
  // Keys the hot-key cache may hold; 0 turns it off. Its memory is bounded by 320 bytes per key
  // (HotKeyMap::kBytesPerKey); the bounds hold per shard (the cache has 16). When a key's shard
  // is full, expired denials make room first, then those not looked up lately are evicted; a
  // key not remembered is simply decided by the backend each time.
  size_t hot_key_capacity = 100'000;
  // Keys the local fallback may hold.
  size_t fallback_max_keys = 1'000'000;
};

class ResilientStore final : public Store, public StoreHealth {
 public:
  ResilientStore(Store& backend, ResilientStoreOptions options = {});
  ~ResilientStore() override;

  // Breakers with their own slot; domain ids at or above it share one (DomainBreakers::kSlots).
  static constexpr size_t kBreakerSlots = 256;

  // StoreHealth: decisions by source, backend errors, and the breakers.
  StoreHealthStats stats() const override;
  BreakerState breaker_state() const override;

  // Store's readiness probe, through the breaker of its key's domain: ProbeAsync(probe, done)
  // with the store's internal peek.
  void ProbeAsync(DecisionCallback done) override;
  // A readiness probe of `probe`'s domain: sends `probe` (a peek, cost 0) to the backend if the
  // breaker of the probe's own domain lets a call through, and answers with the backend's own
  // result, errors included (no failure policy); while that breaker is open it answers
  // UNAVAILABLE at once, without a network call. The outcome counts for that breaker like any
  // call, so with no traffic at all, probes are what close it again once its domain recovers. It
  // says nothing of the other domains: each of their breakers lets the first request after
  // `open_for` through as its probe, and reports `open` until one comes.
  void ProbeAsync(const CheckRequest& probe, DecisionCallback done);

  // The backend's.
  uint32_t FailureDomain(std::string_view scope, std::string_view key) const override;
  std::string FailureDomainName(uint32_t domain) const override;

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override;
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override;
  // The backend's, as it is: no breaker, no failure policy (an outage comes back as its error).
  // The units back may admit what the hot-key cache denied: its denial of the key is dropped
  // when the backend has answered.
  void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by, StatusCallback done) override;
  // The backend's CheckAll when the breaker of every key's domain lets it through; when one does
  // not, or the backend is out, the requests' policies decide as one (FailurePolicies::DecideAll).
  // The hot-key cache is neither read nor filled.
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override;

 private:
  // The decision made here for `request`, without the backend: the hot-key cache's denial, or
  // the failure policy's while the breaker of the key's domain is open (both counted). nullopt
  // when the request goes to the backend, with `pass` the breaker's pass for the call.
  std::optional<Decision> DecideHere(const CheckRequest& request, Time now,
                                     resilience::BreakerPass& pass);
  // DoCheckBatchAsync of one request.
  void CheckOne(const CheckRequest& request, Time now, BatchCallback done);
  // Whether the breaker of the key's domain lets a call through now, and as what.
  resilience::BreakerPass Allow(std::string_view scope, std::string_view key, Time now);
  // Updates the call's breaker and the error count with the backend's answer to it; true if it
  // is an outage (IsStoreOutage), for the failure policy to decide. An outage that `counts` not
  // (CountsAsFailure) only frees the pass. `failed`, for the requests of one store call (a batch,
  // a CheckAll): the domains whose breaker that call has already counted an outage against, so
  // that one failed call counts once however many requests it carried.
  bool Observe(const resilience::BreakerPass& pass, const Result<Decision>& answer,
               bool counts = true, std::vector<uint32_t>* failed = nullptr);
  // The number of a leased check (Leasable) sent to the backend now, from 1; 0 for the others.
  uint64_t Sending(const CheckRequest& request);
  // Whether an outage answered to `request`, sent as number `sent` (Sending), is a failed call
  // of its own for the breaker, rather than one more waiter of the same key's failed lease take.
  bool CountsAsFailure(const CheckRequest& request, uint64_t sent);
  // What goes to the backend for `request` under `pass`: a probe without its lease terms.
  static CheckRequest ToBackend(const CheckRequest& request, const resilience::BreakerPass& pass);
  // The backend's answer to one request sent at `sent`, with the breaker and the cache updated;
  // an outage becomes the request's failure policy, any other error is returned as it is.
  Result<Decision> Settle(const CheckRequest& request, const resilience::BreakerPass& pass,
                          Time sent, uint64_t sent_number, Result<Decision> answer,
                          std::vector<uint32_t>* failed = nullptr);
  bool UsesCache(const CheckRequest& request) const;
  // Forgets the key in this process: the hot-key cache's denial and the local fallback's state.
  void ForgetHere(std::string_view scope, std::string_view key);
  void Count(const Decision& decision);

  Store& backend_;
  const Clock& clock_;
  const std::unique_ptr<resilience::DomainBreakers> breakers_;
  const std::unique_ptr<resilience::HotKeyCache> hot_keys_;  // null when off
  const std::unique_ptr<resilience::FailurePolicies> policies_;
  std::atomic<uint64_t> by_source_[5] = {};
  std::atomic<uint64_t> store_errors_{0};
  // Leased checks sent, and the last outage of a leased check per slot of key hashes: its key's
  // hash and the number of the last check sent by then.
  std::atomic<uint64_t> sent_{0};
  struct LeaseFailure {
    std::atomic<size_t> key_hash{0};
    std::atomic<uint64_t> failed_at{0};
  };
  std::array<LeaseFailure, 64> lease_failures_;
};

}  // namespace sluice
