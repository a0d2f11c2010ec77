#include "rls/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "metrics/prometheus_label.h"

namespace sluice::rls {
DescriptorCounters& Stats::For(std::string_view key) {
  std::lock_guard lock(mu_);
  if (auto it = keys_.find(key); it != keys_.end()) return *it->second;
  if (keys_.size() >= kMaxKeys) key = kOverflowKey;
  auto& slot = keys_[std::string(key)];
  if (!slot) slot = std::make_unique<DescriptorCounters>();
  return *slot;
}

void Stats::Record(DescriptorCounters& counters, const DescriptorOutcome& outcome) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  counters.total_hits.fetch_add(outcome.hits, kRelaxed);
  if (outcome.over_limit) {
    counters.over_limit.fetch_add(outcome.hits, kRelaxed);
    if (outcome.shadow_mode) counters.shadow_mode.fetch_add(outcome.hits, kRelaxed);
    return;
  }
  counters.within_limit.fetch_add(outcome.hits, kRelaxed);
  if (outcome.requests_per_unit == 0) return;
  const auto threshold = static_cast<uint64_t>(
      std::floor(static_cast<double>(outcome.requests_per_unit) * kNearLimitRatio));
  const uint64_t used =
      outcome.requests_per_unit - std::min(outcome.remaining, outcome.requests_per_unit);
  if (used > threshold)
    counters.near_limit.fetch_add(std::min(outcome.hits, used - threshold), kRelaxed);
}

std::string Stats::Exposition() const {
  using Field = std::atomic<uint64_t> DescriptorCounters::*;
  static constexpr std::pair<std::string_view, Field> kCounters[] = {
      {"total_hits", &DescriptorCounters::total_hits},
      {"over_limit", &DescriptorCounters::over_limit},
      {"near_limit", &DescriptorCounters::near_limit},
      {"within_limit", &DescriptorCounters::within_limit},
      {"shadow_mode", &DescriptorCounters::shadow_mode},
  };
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, field] : kCounters) {
    fmt::format_to(std::back_inserter(out), "# TYPE sluice_rls_{} counter\n", name);
    for (const auto& [key, counters] : keys_) {
      fmt::format_to(std::back_inserter(out), "sluice_rls_{}{{key=\"{}\"}} {}\n", name,
                     metrics::PrometheusLabelValue(key),
                     ((*counters).*field).load(std::memory_order_relaxed));
    }
  }
  return out;
}

}  // namespace sluice::rls
