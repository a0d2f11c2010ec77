// Limit: what a limiter enforces — an algorithm, `count` units per `period`, and for the bucket
// algorithms (token_bucket, leaky_bucket, gcra) a `burst` capacity. A Limit can only be built
// through Limit::Create, which rejects values that make no sense, so every Limit in the program
// is valid. Immutable once built; safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice {

enum class Algorithm {
  kFixedWindow,
  kSlidingLog,
  kSlidingWindow,
  kTokenBucket,
  kLeakyBucket,
  kGcra,
};

// "fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra".
std::string_view AlgorithmName(Algorithm algorithm);
Result<Algorithm> ParseAlgorithm(std::string_view name);
inline constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::kFixedWindow, Algorithm::kSlidingLog,  Algorithm::kSlidingWindow,
    Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra,
};

// True for the meters: token_bucket, leaky_bucket and gcra, whose state is a queue of work that
// drains at the limit's rate. Only they take a `burst` (the queue's capacity), and only they can
// book a future slot (CheckRequest::max_delay), their queue growing past its capacity.
bool IsMeter(Algorithm algorithm);

class Limit {
 public:
  // Bounds enforced by Create. They keep every computation exact in 64-bit integers and in the
  // doubles of Redis's Lua (all values stay below 2^53).
  static constexpr int64_t kMaxCount = 1'000'000'000;
  static constexpr int64_t kMaxSlidingLogCount = 100'000;  // its memory is O(count) per key
  static constexpr Duration kMinPeriod = std::chrono::milliseconds(1);
  static constexpr Duration kMaxPeriod = std::chrono::hours(24 * 366);

  // `burst` defaults to `count` for the bucket algorithms and must be absent for the others.
  static Result<Limit> Create(Algorithm algorithm, int64_t count, Duration period,
                              std::optional<int64_t> burst = std::nullopt);

  Algorithm algorithm() const { return algorithm_; }
  int64_t count() const { return count_; }
  Duration period() const { return period_; }
  // The most units admitted at once from a fresh state: `burst` for the bucket algorithms,
  // `count` for the window algorithms. A cost above it can never be admitted.
  int64_t capacity() const { return capacity_; }
  // period / count rounded up to a whole microsecond: the time one unit takes to replenish in the
  // bucket algorithms (rounding up means the rate never exceeds count/period).
  Duration emission_interval() const { return emission_interval_; }

  friend bool operator==(const Limit&, const Limit&) = default;

 private:
  Limit() = default;

  Algorithm algorithm_ = Algorithm::kGcra;
  int64_t count_ = 0;
  Duration period_{};
  int64_t capacity_ = 0;
  Duration emission_interval_{};
};

}  // namespace sluice
