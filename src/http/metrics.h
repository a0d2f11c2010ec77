// The service's Prometheus metrics, kept in atomics so counting on the request path neither
// locks nor allocates:
//
//   sluice_checks_total{rule,result="allowed|denied"}   decisions made, per rule, as answered (a
//                                                       rule in shadow mode answers allowed)
//   sluice_shadow_checks_total{rule,result}             the would-be verdicts (allowed, denied)
//                                                       of a rule in shadow mode; for the rules
//                                                       that have been in shadow mode since start
//   sluice_decisions_total{rule,source}                 decisions, per rule and deciding path
//                                                       (store, hot_key_cache, fail_open,
//                                                       fail_closed, local_fallback)
//   sluice_store_errors_total                           checks the store failed to decide
//                                                       (answered with an error or degraded)
//   sluice_check_duration_seconds                       histogram: check request to decision
//   sluice_http_requests_total{code}                    responses sent, per status code
//   sluice_acquires_total{rule,outcome}                 /v1/acquire requests ended, per rule and
//                                                       outcome (admitted, denied, queue_full,
//                                                       cancelled)
//   sluice_key_resets_total{rule}                       keys reset (DELETE /v1/keys/{rule}/{key})
//   sluice_acquire_waiters{rule}                        gauge: /v1/acquire requests in progress
//                                                       (as the WaiterCounts watched count them)
//   sluice_http_connections                             gauge: connections open, counted against
//                                                       server.max_connections
//   sluice_http_connections_refused_total               connections refused at the bound (503)
//   sluice_http_idle_connections_closed_total           idle connections closed to make room
//                                                       near the bound
//   sluice_http_accept_errors_total                     accepts that failed (out of file
//                                                       descriptors), each pausing accepts
//
// With a StoreHealth watched (a ResilientStore's), also:
//   sluice_breaker_state{state}                         1 for the worst breaker's state
//   sluice_breaker_opens_total                          times any breaker opened
//   sluice_node_breaker_state{node,state}               1 for each store node's breaker state
//   sluice_node_breaker_opens_total{node}               times that node's breaker opened
//                                                       (a node: a Redis Cluster master, or the
//                                                       one Redis; those that saw a request)
//   sluice_hot_key_cache_hits_total                     denials made by the hot-key cache
//
// With a StoreMemory watched (a MemoryStore's), also:
//   sluice_memory_store_bytes                           gauge: memory the store holds for keys
//   sluice_memory_store_max_bytes                       gauge: its bound (store.max_memory)
//   sluice_memory_store_keys                            gauge: keys held
//   sluice_memory_store_evictions_total{reason}         states dropped: fresh (back to fresh,
//                                                       no decision changes) or lru (live, least
//                                                       recently used, to stay within the bound)
//
// With a LeaseReport watched (a LeasingStore's), also:
//   sluice_lease_taken_total                            leases taken from the store
//   sluice_lease_units_taken_total                      units those leases consumed in the store
//   sluice_lease_units_used_total                       units admitted from leases here
//   sluice_lease_units_returned_total                   unused units given back to the store
//   sluice_lease_units_lapsed_total                     unused units that lapsed with their lease
//   sluice_lease_refusals_total                         checks refused here: the store had no
//                                                       lease to give
//   sluice_lease_held_keys                              gauge: keys holding a lease or a refusal
//
// A rule's counters are created when a rule set naming it is loaded and then live as long as the
// Metrics, so a reload neither resets nor loses them.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "sluice/acquirer.h"
#include "sluice/decision.h"
#include "sluice/lease_stats.h"
#include "sluice/store_health.h"
#include "sluice/store_memory.h"

namespace sluice::http {

inline constexpr size_t kDecisionSources = static_cast<size_t>(DecisionSource::kLocalFallback) + 1;
inline constexpr size_t kAcquireOutcomes = static_cast<size_t>(AcquireOutcome::kCancelled) + 1;

struct RuleCounters {
  std::atomic<uint64_t> allowed{0};
  std::atomic<uint64_t> denied{0};
  std::array<std::atomic<uint64_t>, kDecisionSources> by_source{};
  std::array<std::atomic<uint64_t>, kAcquireOutcomes> acquires{};  // by outcome
  std::atomic<uint64_t> shadow_allowed{0};
  std::atomic<uint64_t> shadow_denied{0};
  std::atomic<bool> shadowed{false};  // set by a rule set with the rule in shadow mode
  std::atomic<uint64_t> resets{0};    // keys whose state the store forgot
};

// Where the acquires in progress are counted (the acquire lines, http/rule_acquirers.h): the
// exposition reads them, as they are, each time. Thread safety: Waiters may be called from any
// thread.
class WaiterCounts {
 public:
  // The acquires in progress for rule `rule`; 0 for a rule with none.
  virtual size_t Waiters(std::string_view rule) const = 0;

 protected:
  ~WaiterCounts() = default;
};

class Metrics {
 public:
  // Upper bounds of the latency histogram's buckets, in nanoseconds (+Inf is implied).
  static constexpr std::array<int64_t, 14> kBucketBoundsNs = {
      50'000,     100'000,    250'000,    500'000,     1'000'000,   2'500'000,   5'000'000,
      10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000};
  // The status codes counted one by one; any other is counted as "other".
  static constexpr std::array<int, 7> kHttpCodes = {200, 400, 404, 405, 413, 431, 503};

  // The counters of rule `name`, created on first call. The reference stays valid for the
  // lifetime of this object. `name` must not need escaping in a label value (no '"', '\', LF).
  RuleCounters& ForRule(std::string_view name);

  // A decision of a rule, in shadow mode when `shadow`: counted allowed, and its would-be verdict
  // counted apart.
  void CountDecision(RuleCounters& rule, const Decision& decision, bool shadow = false) {
    const auto add = [](std::atomic<uint64_t>& n) { n.fetch_add(1, std::memory_order_relaxed); };
    add(decision.allowed || shadow ? rule.allowed : rule.denied);
    add(rule.by_source[static_cast<size_t>(decision.source)]);
    if (shadow) add(decision.allowed ? rule.shadow_allowed : rule.shadow_denied);
  }
  void CountAcquire(RuleCounters& rule, AcquireOutcome outcome) {
    rule.acquires[static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
  }
  void CountReset(RuleCounters& rule) { rule.resets.fetch_add(1, std::memory_order_relaxed); }
  void CountStoreError() { store_errors_.fetch_add(1, std::memory_order_relaxed); }
  // A request refused by the store's admission (core/fair_admission.h), answered 503.
  void CountAdmissionRefused() { admission_refused_.fetch_add(1, std::memory_order_relaxed); }
  // The HTTP server's connections (http/server.h).
  void SetOpenConnections(size_t open) { connections_.open.store(open, std::memory_order_relaxed); }
  void CountConnectionRefused() { connections_.refused.fetch_add(1, std::memory_order_relaxed); }
  void CountIdleConnectionClosed() {
    connections_.idle_closed.fetch_add(1, std::memory_order_relaxed);
  }
  void CountAcceptError() { connections_.accept_errors.fetch_add(1, std::memory_order_relaxed); }
  void ObserveCheckDuration(std::chrono::nanoseconds elapsed);
  void CountHttpResponse(int status);

  uint64_t store_errors() const { return store_errors_.load(std::memory_order_relaxed); }
  // For tests only: the responses counted with `status`, and the checks timed.
  uint64_t http_responses_for_testing(int status) const;
  uint64_t check_duration_count_for_testing() const;

  // Adds the store's breakers and hot-key cache to the exposition; `health` must outlive this
  // object. Call before the metrics are served.
  void Watch(const StoreHealth& health) { health_ = &health; }
  // Adds the store's memory to the exposition; `memory` must outlive this object. Call before the
  // metrics are served.
  void Watch(const StoreMemory& memory) { memory_ = &memory; }
  // Adds the store's leases to the exposition; `leases` must outlive this object. Call before the
  // metrics are served.
  void Watch(const LeaseReport& leases) { leases_ = &leases; }
  // Adds `waiters` to the sluice_acquire_waiters gauge (several are summed) until
  // StopWatching(waiters); it must live until then.
  void Watch(const WaiterCounts& waiters);
  void StopWatching(const WaiterCounts& waiters);

  // The text exposition format, version 0.0.4.
  std::string Exposition() const;

 private:
  mutable base::Mutex rules_mu_;
  std::map<std::string, std::unique_ptr<RuleCounters>, std::less<>> rules_
      SLUICE_GUARDED_BY(rules_mu_);
  std::vector<const WaiterCounts*> waiters_ SLUICE_GUARDED_BY(rules_mu_);

  const StoreHealth* health_ = nullptr;
  const StoreMemory* memory_ = nullptr;
  const LeaseReport* leases_ = nullptr;
  std::atomic<uint64_t> store_errors_{0};
  std::atomic<uint64_t> admission_refused_{0};
  std::array<std::atomic<uint64_t>, kBucketBoundsNs.size() + 1> buckets_{};  // last: +Inf
  std::atomic<uint64_t> duration_sum_ns_{0};
  std::array<std::atomic<uint64_t>, kHttpCodes.size() + 1> http_{};  // last: other codes
  struct {
    std::atomic<uint64_t> open{0};
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> idle_closed{0};
    std::atomic<uint64_t> accept_errors{0};
  } connections_;
};

}  // namespace sluice::http
