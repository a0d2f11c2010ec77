#include "http/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "base/prometheus_label.h"

namespace sluice::http {
namespace {

size_t HttpSlot(int status) {
  for (size_t i = 0; i < Metrics::kHttpCodes.size(); ++i) {
    if (Metrics::kHttpCodes[i] == status) return i;
  }
  return Metrics::kHttpCodes.size();
}

uint64_t Load(const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); }

}  // namespace

RuleCounters& Metrics::ForRule(std::string_view name) {
  base::MutexLock lock(rules_mu_);
  auto it = rules_.find(name);
  if (it == rules_.end()) {
    it = rules_.emplace(std::string(name), std::make_unique<RuleCounters>()).first;
  }
  return *it->second;
}

void Metrics::Watch(const WaiterCounts& waiters) {
  base::MutexLock lock(rules_mu_);
  waiters_.push_back(&waiters);
}

void Metrics::StopWatching(const WaiterCounts& waiters) {
  base::MutexLock lock(rules_mu_);
  std::erase(waiters_, &waiters);
}

void Metrics::ObserveCheckDuration(std::chrono::nanoseconds elapsed) {
  const int64_t ns = std::max<int64_t>(elapsed.count(), 0);
  size_t bucket = 0;
  while (bucket < kBucketBoundsNs.size() && ns > kBucketBoundsNs[bucket]) ++bucket;
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  duration_sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

void Metrics::CountHttpResponse(int status) {
  http_[HttpSlot(status)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t Metrics::http_responses_for_testing(int status) const {
  return Load(http_[HttpSlot(status)]);
}

uint64_t Metrics::check_duration_count_for_testing() const {
  uint64_t total = 0;
  for (const auto& b : buckets_) total += Load(b);
  return total;
}

std::string Metrics::Exposition() const {
  std::string out;
  auto put = std::back_inserter(out);

  fmt::format_to(put,
                 "# HELP sluice_checks_total Checks decided, by rule and result.\n"
                 "# TYPE sluice_checks_total counter\n");
  {
    base::MutexLock lock(rules_mu_);
    for (const auto& [name, counters] : rules_) {
      fmt::format_to(put, "sluice_checks_total{{rule=\"{}\",result=\"allowed\"}} {}\n", name,
                     Load(counters->allowed));
      fmt::format_to(put, "sluice_checks_total{{rule=\"{}\",result=\"denied\"}} {}\n", name,
                     Load(counters->denied));
    }
    const auto shadowed = [](const auto& entry) {
      return entry.second->shadowed.load(std::memory_order_relaxed);
    };
    if (std::any_of(rules_.begin(), rules_.end(), shadowed)) {
      fmt::format_to(put,
                     "# HELP sluice_shadow_checks_total Would-be verdicts of rules in shadow mode, "
                     "by rule and result.\n"
                     "# TYPE sluice_shadow_checks_total counter\n");
      for (const auto& entry : rules_) {
        if (!shadowed(entry)) continue;
        const auto& [name, counters] = entry;
        fmt::format_to(put, "sluice_shadow_checks_total{{rule=\"{}\",result=\"allowed\"}} {}\n",
                       name, Load(counters->shadow_allowed));
        fmt::format_to(put, "sluice_shadow_checks_total{{rule=\"{}\",result=\"denied\"}} {}\n",
                       name, Load(counters->shadow_denied));
      }
    }
    fmt::format_to(put,
                   "# HELP sluice_decisions_total Decisions, by rule and the path that made them.\n"
                   "# TYPE sluice_decisions_total counter\n");
    for (const auto& [name, counters] : rules_) {
      for (size_t source = 0; source < kDecisionSources; ++source) {
        fmt::format_to(put, "sluice_decisions_total{{rule=\"{}\",source=\"{}\"}} {}\n", name,
                       DecisionSourceName(static_cast<DecisionSource>(source)),
                       Load(counters->by_source[source]));
      }
    }
    fmt::format_to(put,
                   "# HELP sluice_acquires_total Acquires ended, by rule and outcome.\n"
                   "# TYPE sluice_acquires_total counter\n");
    for (const auto& [name, counters] : rules_) {
      for (size_t outcome = 0; outcome < kAcquireOutcomes; ++outcome) {
        fmt::format_to(put, "sluice_acquires_total{{rule=\"{}\",outcome=\"{}\"}} {}\n", name,
                       AcquireOutcomeName(static_cast<AcquireOutcome>(outcome)),
                       Load(counters->acquires[outcome]));
      }
    }
    fmt::format_to(put,
                   "# HELP sluice_key_resets_total Keys whose state was reset, by rule.\n"
                   "# TYPE sluice_key_resets_total counter\n");
    for (const auto& [name, counters] : rules_) {
      fmt::format_to(put, "sluice_key_resets_total{{rule=\"{}\"}} {}\n", name,
                     Load(counters->resets));
    }
    fmt::format_to(put,
                   "# HELP sluice_acquire_waiters Acquires in progress, by rule.\n"
                   "# TYPE sluice_acquire_waiters gauge\n");
    for (const auto& [name, counters] : rules_) {
      size_t waiters = 0;
      for (const WaiterCounts* counts : waiters_) waiters += counts->Waiters(name);
      fmt::format_to(put, "sluice_acquire_waiters{{rule=\"{}\"}} {}\n", name, waiters);
    }
  }

  fmt::format_to(put,
                 "# HELP sluice_store_errors_total Checks the store failed to decide.\n"
                 "# TYPE sluice_store_errors_total counter\n"
                 "sluice_store_errors_total {}\n",
                 store_errors());
  fmt::format_to(put,
                 "# HELP sluice_admission_refused_total Requests refused 503 because they would "
                 "take their connection past its share of the store's work in flight.\n"
                 "# TYPE sluice_admission_refused_total counter\n"
                 "sluice_admission_refused_total {}\n",
                 admission_refused_.load(std::memory_order_relaxed));

  fmt::format_to(put,
                 "# HELP sluice_check_duration_seconds Time from a parsed check request to its "
                 "decision.\n"
                 "# TYPE sluice_check_duration_seconds histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBucketBoundsNs.size(); ++i) {
    cumulative += Load(buckets_[i]);
    fmt::format_to(put, "sluice_check_duration_seconds_bucket{{le=\"{}\"}} {}\n",
                   static_cast<double>(kBucketBoundsNs[i]) / 1e9, cumulative);
  }
  cumulative += Load(buckets_.back());
  fmt::format_to(put,
                 "sluice_check_duration_seconds_bucket{{le=\"+Inf\"}} {}\n"
                 "sluice_check_duration_seconds_sum {}\n"
                 "sluice_check_duration_seconds_count {}\n",
                 cumulative, static_cast<double>(Load(duration_sum_ns_)) / 1e9, cumulative);

  fmt::format_to(put,
                 "# HELP sluice_http_requests_total HTTP responses sent, by status code.\n"
                 "# TYPE sluice_http_requests_total counter\n");
  for (size_t i = 0; i < kHttpCodes.size(); ++i) {
    fmt::format_to(put, "sluice_http_requests_total{{code=\"{}\"}} {}\n", kHttpCodes[i],
                   Load(http_[i]));
  }
  fmt::format_to(put, "sluice_http_requests_total{{code=\"other\"}} {}\n", Load(http_.back()));
  fmt::format_to(put,
                 "# HELP sluice_http_connections HTTP connections open.\n"
                 "# TYPE sluice_http_connections gauge\n"
                 "sluice_http_connections {}\n"
                 "# HELP sluice_http_connections_refused_total Connections refused at "
                 "server.max_connections.\n"
                 "# TYPE sluice_http_connections_refused_total counter\n"
                 "sluice_http_connections_refused_total {}\n"
                 "# HELP sluice_http_idle_connections_closed_total Idle connections closed to make "
                 "room near server.max_connections.\n"
                 "# TYPE sluice_http_idle_connections_closed_total counter\n"
                 "sluice_http_idle_connections_closed_total {}\n"
                 "# HELP sluice_http_accept_errors_total Accepts that failed (out of file "
                 "descriptors).\n"
                 "# TYPE sluice_http_accept_errors_total counter\n"
                 "sluice_http_accept_errors_total {}\n",
                 Load(connections_.open), Load(connections_.refused),
                 Load(connections_.idle_closed), Load(connections_.accept_errors));

  if (memory_ != nullptr) {
    const StoreMemoryStats stats = memory_->memory_stats();
    fmt::format_to(put,
                   "# HELP sluice_memory_store_bytes Memory the in-memory store holds for its keys "
                   "(table slots, long keys, sliding_log entries).\n"
                   "# TYPE sluice_memory_store_bytes gauge\n"
                   "sluice_memory_store_bytes {}\n"
                   "# HELP sluice_memory_store_max_bytes The in-memory store's bound "
                   "(store.max_memory).\n"
                   "# TYPE sluice_memory_store_max_bytes gauge\n"
                   "sluice_memory_store_max_bytes {}\n"
                   "# HELP sluice_memory_store_keys Keys the in-memory store holds.\n"
                   "# TYPE sluice_memory_store_keys gauge\n"
                   "sluice_memory_store_keys {}\n"
                   "# HELP sluice_memory_store_evictions_total States the in-memory store dropped: "
                   "fresh = back to fresh (no decision changes), lru = live, least recently used, "
                   "to stay within store.max_memory.\n"
                   "# TYPE sluice_memory_store_evictions_total counter\n"
                   "sluice_memory_store_evictions_total{{reason=\"fresh\"}} {}\n"
                   "sluice_memory_store_evictions_total{{reason=\"lru\"}} {}\n",
                   stats.bytes, stats.max_bytes, stats.keys, stats.evicted_fresh,
                   stats.evicted_lru);
  }

  if (leases_ != nullptr) {
    const LeaseStats stats = leases_->lease_stats();
    fmt::format_to(put,
                   "# HELP sluice_lease_taken_total Leases taken from the store.\n"
                   "# TYPE sluice_lease_taken_total counter\n"
                   "sluice_lease_taken_total {}\n"
                   "# HELP sluice_lease_units_taken_total Units the leases taken consumed in the "
                   "store.\n"
                   "# TYPE sluice_lease_units_taken_total counter\n"
                   "sluice_lease_units_taken_total {}\n"
                   "# HELP sluice_lease_units_used_total Units admitted from leases in this "
                   "process.\n"
                   "# TYPE sluice_lease_units_used_total counter\n"
                   "sluice_lease_units_used_total {}\n"
                   "# HELP sluice_lease_units_returned_total Unused units of ended leases given "
                   "back to the store.\n"
                   "# TYPE sluice_lease_units_returned_total counter\n"
                   "sluice_lease_units_returned_total {}\n"
                   "# HELP sluice_lease_units_lapsed_total Unused units of ended leases neither "
                   "used nor given back.\n"
                   "# TYPE sluice_lease_units_lapsed_total counter\n"
                   "sluice_lease_units_lapsed_total {}\n"
                   "# HELP sluice_lease_refusals_total Checks refused in this process because the "
                   "store had no lease to give.\n"
                   "# TYPE sluice_lease_refusals_total counter\n"
                   "sluice_lease_refusals_total {}\n"
                   "# HELP sluice_lease_held_keys Keys holding a lease or a refusal now.\n"
                   "# TYPE sluice_lease_held_keys gauge\n"
                   "sluice_lease_held_keys {}\n",
                   stats.taken, stats.units_taken, stats.units_used, stats.units_returned,
                   stats.units_lapsed, stats.refusals, stats.held);
  }

  if (health_ != nullptr) {
    const StoreHealthStats stats = health_->stats();
    fmt::format_to(put,
                   "# HELP sluice_breaker_state The store's circuit breaker: 1 for its state.\n"
                   "# TYPE sluice_breaker_state gauge\n");
    for (auto state : {BreakerState::kClosed, BreakerState::kOpen, BreakerState::kHalfOpen}) {
      fmt::format_to(put, "sluice_breaker_state{{state=\"{}\"}} {}\n", BreakerStateName(state),
                     stats.breaker == state ? 1 : 0);
    }
    fmt::format_to(put,
                   "# HELP sluice_breaker_opens_total Times the store's circuit breaker opened.\n"
                   "# TYPE sluice_breaker_opens_total counter\n"
                   "sluice_breaker_opens_total {}\n"
                   "# HELP sluice_hot_key_cache_hits_total Denials made by the hot-key cache "
                   "without a store round trip.\n"
                   "# TYPE sluice_hot_key_cache_hits_total counter\n"
                   "sluice_hot_key_cache_hits_total {}\n",
                   stats.breaker_opens, stats.hot_key_cache);
    fmt::format_to(put,
                   "# HELP sluice_node_breaker_state A store node's circuit breaker: 1 for its "
                   "state.\n"
                   "# TYPE sluice_node_breaker_state gauge\n");
    for (const DomainBreakerStats& b : stats.breakers) {
      for (auto state : {BreakerState::kClosed, BreakerState::kOpen, BreakerState::kHalfOpen}) {
        fmt::format_to(put, "sluice_node_breaker_state{{node=\"{}\",state=\"{}\"}} {}\n",
                       base::PrometheusLabelValue(b.domain), BreakerStateName(state),
                       b.state == state ? 1 : 0);
      }
    }
    fmt::format_to(put,
                   "# HELP sluice_node_breaker_opens_total Times a store node's circuit breaker "
                   "opened.\n"
                   "# TYPE sluice_node_breaker_opens_total counter\n");
    for (const DomainBreakerStats& b : stats.breakers) {
      fmt::format_to(put, "sluice_node_breaker_opens_total{{node=\"{}\"}} {}\n",
                     base::PrometheusLabelValue(b.domain), b.opens);
    }
  }
  return out;
}

}  // namespace sluice::http
