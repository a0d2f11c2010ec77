// What the fault tests of the library (tests/redis/fault_test.cc) and of `sluice serve`
// (tests/http/serve_fault_test.cc) count of the decisions made under load: one rule per failure
// policy (kPolicies, in this order), and for each the decisions and admissions per deciding path
// (DecisionSource); plus the small timing helpers both use.
//
// DecisionTally may be added to from any thread; a DecisionCounts snapshot has one owner.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/decision.h"
#include "sluice/store.h"

namespace sluice::testing {

inline constexpr std::array<FailurePolicy, 3> kPolicies = {
    FailurePolicy::kFailOpen, FailurePolicy::kFailClosed, FailurePolicy::kLocalFallback};
inline constexpr size_t kSourceCount = 5;  // DecisionSource values

// The source a policy's decisions have when the store fails.
inline DecisionSource SourceOf(FailurePolicy policy) {
  switch (policy) {
    case FailurePolicy::kFailOpen:
      return DecisionSource::kFailOpen;
    case FailurePolicy::kFailClosed:
      return DecisionSource::kFailClosed;
    case FailurePolicy::kLocalFallback:
      return DecisionSource::kLocalFallback;
  }
  return DecisionSource::kStore;
}

// The source DecisionSourceName names ("store", "fail_open", ...); nullopt for another name.
inline std::optional<DecisionSource> SourceNamed(std::string_view name) {
  for (size_t s = 0; s < kSourceCount; ++s) {
    const auto source = static_cast<DecisionSource>(s);
    if (name == DecisionSourceName(source)) return source;
  }
  return std::nullopt;
}

struct DecisionCounts {
  int64_t decided[kPolicies.size()][kSourceCount] = {};
  int64_t allowed[kPolicies.size()][kSourceCount] = {};

  int64_t By(size_t policy, DecisionSource source) const {
    return decided[policy][static_cast<size_t>(source)];
  }
  int64_t AllowedBy(size_t policy, DecisionSource source) const {
    return allowed[policy][static_cast<size_t>(source)];
  }
  DecisionCounts operator-(const DecisionCounts& earlier) const {
    DecisionCounts d = *this;
    for (size_t p = 0; p < kPolicies.size(); ++p) {
      for (size_t s = 0; s < kSourceCount; ++s) {
        d.decided[p][s] -= earlier.decided[p][s];
        d.allowed[p][s] -= earlier.allowed[p][s];
      }
    }
    return d;
  }
  // "fail_open: 12 store 3 fail_open; fail_closed: ..."
  std::string ToString() const {
    std::string out;
    for (size_t p = 0; p < kPolicies.size(); ++p) {
      out += std::string(p == 0 ? "" : "; ") + FailurePolicyName(kPolicies[p]) + ":";
      for (size_t s = 0; s < kSourceCount; ++s) {
        if (decided[p][s] == 0) continue;
        out += " " + std::to_string(decided[p][s]) + " " +
               DecisionSourceName(static_cast<DecisionSource>(s));
      }
    }
    return out;
  }
};

class DecisionTally {
 public:
  void Add(size_t policy, DecisionSource source, bool allowed) {
    const auto s = static_cast<size_t>(source);
    ++decided_[policy][s];
    if (allowed) ++allowed_[policy][s];
  }
  DecisionCounts Snapshot() const {
    DecisionCounts c;
    for (size_t p = 0; p < kPolicies.size(); ++p) {
      for (size_t s = 0; s < kSourceCount; ++s) {
        c.decided[p][s] = decided_[p][s].load();
        c.allowed[p][s] = allowed_[p][s].load();
      }
    }
    return c;
  }

 private:
  std::atomic<int64_t> decided_[kPolicies.size()][kSourceCount] = {};
  std::atomic<int64_t> allowed_[kPolicies.size()][kSourceCount] = {};
};

inline int64_t Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

inline double Millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Raises `max` to `value` if it is lower.
inline void RaiseTo(std::atomic<int64_t>& max, int64_t value) {
  int64_t seen = max.load();
  while (value > seen && !max.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace sluice::testing
