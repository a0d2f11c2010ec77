// The rate limit service's Prometheus counters, as envoyproxy/ratelimit names its stats, per
// descriptor stats key ("domain.key1_value1.key2", see rls/matcher.h; values appear only where
// the configuration asks for detailed_metric or value_to_metric):
//
//   sluice_rls_total_hits{key}     hits asked for
//   sluice_rls_over_limit{key}     hits over the descriptor's own limit (shadow mode included)
//   sluice_rls_near_limit{key}     hits admitted beyond kNearLimitRatio of the limit
//   sluice_rls_within_limit{key}   hits within the limit
//   sluice_rls_shadow_mode{key}    hits over the limit that shadow mode admitted
//
// Cardinality is bounded: after kMaxKeys distinct keys, every new key is counted under
// kOverflowKey. So are the bytes: a key (which may hold a request's descriptor values) that is
// longer than kMaxKeyBytes, or not UTF-8 (which the exposition format requires), is
// counted under "sha256:" and its SHA-256 in hex (KeyOf). The exposition is then at most
// kMaxExpositionBytes. Counters live as long as the Stats, across reloads.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/mutex.h"

namespace sluice::rls {

struct DescriptorCounters {
  std::atomic<uint64_t> total_hits{0};
  std::atomic<uint64_t> over_limit{0};
  std::atomic<uint64_t> near_limit{0};
  std::atomic<uint64_t> within_limit{0};
  std::atomic<uint64_t> shadow_mode{0};
};

// What one descriptor's decision adds to its counters.
struct DescriptorOutcome {
  uint64_t hits = 0;
  bool over_limit = false;   // over its own limit
  bool shadow_mode = false;  // admitted all the same
  // For near_limit: the limit's requests per unit and the units left after the hits (when
  // admitted); 0 requests per unit counts no near_limit.
  uint64_t requests_per_unit = 0;
  uint64_t remaining = 0;
};

class Stats {
 public:
  static constexpr size_t kMaxKeys = 1000;
  static constexpr size_t kMaxKeyBytes = 256;
  // Each of the 5 counters of kMaxKeys keys and kOverflowKey, on a line of at most its name, the
  // key with every byte escaped, and a 20-digit value; and the 5 TYPE lines.
  static constexpr size_t kMaxExpositionBytes =
      5 * ((kMaxKeys + 1) *
               (sizeof("sluice_rls_within_limit{key=\"\"} \n") - 1 + 2 * kMaxKeyBytes + 20) +
           sizeof("# TYPE sluice_rls_within_limit counter\n") - 1);
  static constexpr std::string_view kOverflowKey = "_overflow";
  // As envoyproxy/ratelimit: hits beyond 80% of the limit are near it.
  static constexpr double kNearLimitRatio = 0.8;

  // The key `name` is counted under: `name` itself, or its hash when it is longer than
  // kMaxKeyBytes or not UTF-8.
  static std::string KeyOf(std::string_view name);

  // The counters of KeyOf(`name`), created on first call (kOverflowKey's beyond kMaxKeys); the
  // reference stays valid as long as this object.
  DescriptorCounters& For(std::string_view name);
  void Record(DescriptorCounters& counters, const DescriptorOutcome& outcome);

  // The text exposition format's lines for the counters above.
  std::string Exposition() const;

 private:
  mutable base::Mutex mu_;
  std::map<std::string, std::unique_ptr<DescriptorCounters>, std::less<>> keys_
      SLUICE_GUARDED_BY(mu_);
};

}  // namespace sluice::rls
