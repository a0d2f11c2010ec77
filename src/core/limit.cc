#include "sluice/limit.h"

#include <string>

#include "base/names.h"

namespace sluice {
namespace {

constexpr base::EnumName<Algorithm> kAlgorithmNames[] = {
    {Algorithm::kFixedWindow, "fixed_window"},     {Algorithm::kSlidingLog, "sliding_log"},
    {Algorithm::kSlidingWindow, "sliding_window"}, {Algorithm::kTokenBucket, "token_bucket"},
    {Algorithm::kLeakyBucket, "leaky_bucket"},     {Algorithm::kGcra, "gcra"},
};

std::string Num(int64_t v) { return std::to_string(v); }

}  // namespace

std::string_view AlgorithmName(Algorithm algorithm) {
  return base::NameOf(kAlgorithmNames, algorithm);
}

Result<Algorithm> ParseAlgorithm(std::string_view name) {
  if (auto algorithm = base::ParseName(kAlgorithmNames, name)) return *algorithm;
  return Status::InvalidArgument("unknown algorithm '" + std::string(name) + "' (expected " +
                                 base::NameList(kAlgorithmNames) + ")");
}

bool IsMeter(Algorithm algorithm) {
  return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket ||
         algorithm == Algorithm::kGcra;
}

Result<Limit> Limit::Create(Algorithm algorithm, int64_t count, Duration period,
                            std::optional<int64_t> burst) {
  const std::string name(AlgorithmName(algorithm));
  if (count <= 0) return Status::InvalidArgument("limit must be positive, got " + Num(count));
  if (count > kMaxCount) {
    return Status::InvalidArgument("limit " + Num(count) + " is above the maximum " +
                                   Num(kMaxCount));
  }
  if (algorithm == Algorithm::kSlidingLog && count > kMaxSlidingLogCount) {
    return Status::InvalidArgument("sliding_log keeps one entry per admitted request; limit " +
                                   Num(count) + " is above its maximum " +
                                   Num(kMaxSlidingLogCount) + " (use sliding_window)");
  }
  if (period < kMinPeriod || period > kMaxPeriod) {
    return Status::InvalidArgument("period must be between 1ms and 366 days, got " +
                                   Num(period.count()) + "us");
  }
  Limit limit;
  limit.algorithm_ = algorithm;
  limit.count_ = count;
  limit.period_ = period;
  limit.capacity_ = count;
  limit.emission_interval_ = Duration((period.count() + count - 1) / count);
  if (!IsMeter(algorithm)) {
    if (burst) {
      return Status::InvalidArgument("burst applies to token_bucket, leaky_bucket and gcra, not " +
                                     name);
    }
    return limit;
  }
  if (period.count() < count) {
    return Status::InvalidArgument("rate above one unit per microsecond: " + Num(count) + " per " +
                                   Num(period.count()) + "us");
  }
  if (burst) {
    if (*burst <= 0) return Status::InvalidArgument("burst must be positive, got " + Num(*burst));
    if (*burst > kMaxCount) {
      return Status::InvalidArgument("burst " + Num(*burst) + " is above the maximum " +
                                     Num(kMaxCount));
    }
    limit.capacity_ = *burst;
  }
  if (limit.capacity_ > kMaxPeriod.count() / limit.emission_interval_.count()) {
    return Status::InvalidArgument("refilling a burst of " + Num(limit.capacity_) +
                                   " would take more than 366 days");
  }
  return limit;
}

}  // namespace sluice
