#include "rls/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/hashed_key.h"
#include "base/prometheus_label.h"

namespace sluice::rls {
namespace {

// Whether `text` is valid UTF-8 (RFC 3629: shortest forms, no surrogates, up to U+10FFFF).
bool ValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    uint32_t code = lead;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2, code = lead & 0x1f;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3, code = lead & 0x0f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4, code = lead & 0x07;
    } else if (lead >= 0x80) {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kLeast[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += length;
  }
  return true;
}

}  // namespace

std::string Stats::KeyOf(std::string_view name) {
  if (name.size() <= kMaxKeyBytes && ValidUtf8(name)) return std::string(name);
  // libcrypto failing (it cannot but for its own allocation): counted under the overflow key.
  return base::HashedKey(name).value_or(std::string(kOverflowKey));
}

DescriptorCounters& Stats::For(std::string_view name) {
  std::string key = KeyOf(name);
  base::MutexLock lock(mu_);
  if (auto it = keys_.find(key); it != keys_.end()) return *it->second;
  if (keys_.size() >= kMaxKeys) key = kOverflowKey;
  auto& slot = keys_[std::move(key)];
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
  base::MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, field] : kCounters) {
    fmt::format_to(std::back_inserter(out), "# TYPE sluice_rls_{} counter\n", name);
    for (const auto& [key, counters] : keys_) {
      fmt::format_to(std::back_inserter(out), "sluice_rls_{}{{key=\"{}\"}} {}\n", name,
                     base::PrometheusLabelValue(key),
                     ((*counters).*field).load(std::memory_order_relaxed));
    }
  }
  return out;
}

}  // namespace sluice::rls
