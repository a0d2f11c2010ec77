#include "core/check_request.h"

#include <string>

#include "base/scoped_key.h"

namespace sluice {

Duration MaxDelayOf(const Limit& limit) {
  // Compared by division: interval × kMaxCount may not fit in 64 bits.
  if (limit.emission_interval() > Limit::kMaxPeriod / Limit::kMaxCount) return Limit::kMaxPeriod;
  return limit.emission_interval() * Limit::kMaxCount;
}

bool Leasable(const CheckRequest& request) {
  return request.lease.units > 0 && request.cost >= 1 && request.max_delay.count() == 0 &&
         request.cost <= request.lease.units;
}

Status ValidateCheck(const CheckRequest& request) {
  if (request.limit == nullptr) return Status::InvalidArgument("check without a limit");
  if (Status s = core::ValidateScopeAndKey(request.scope, request.key); !s.ok()) return s;
  if (request.cost < 0) {
    return Status::InvalidArgument("cost must not be negative, got " +
                                   std::to_string(request.cost));
  }
  if (request.cost > request.limit->capacity()) {
    return Status::CostExceedsLimit(
        "cost " + std::to_string(request.cost) + " exceeds the capacity " +
        std::to_string(request.limit->capacity()) + " of this limit; it can never be admitted");
  }
  if (request.max_delay.count() != 0) {
    const Algorithm algorithm = request.limit->algorithm();
    if (!IsMeter(algorithm)) {
      return Status::InvalidArgument(
          "max_delay (booking a future slot) applies to token_bucket, leaky_bucket and gcra, "
          "not " +
          std::string(AlgorithmName(algorithm)));
    }
    const Duration most = MaxDelayOf(*request.limit);
    if (request.max_delay.count() < 0 || request.max_delay > most) {
      return Status::InvalidArgument("max_delay must be between 0 and " +
                                     std::to_string(most.count()) + "us for this limit, got " +
                                     std::to_string(request.max_delay.count()) + "us");
    }
  }
  return ValidateLeaseTerms(*request.limit, request.lease);
}

Status ValidateLeaseTerms(const Limit& limit, const LeaseTerms& terms) {
  if (terms.units == 0) return Status::Ok();
  const Algorithm algorithm = limit.algorithm();
  if (algorithm != Algorithm::kFixedWindow && !IsMeter(algorithm)) {
    return Status::InvalidArgument(
        "leases apply to fixed_window, token_bucket, leaky_bucket and gcra, not " +
        std::string(AlgorithmName(algorithm)) +
        ": a sliding window weighs each unit by when it was admitted");
  }
  if (terms.units < 0 || terms.units > limit.capacity()) {
    return Status::InvalidArgument("lease units must be between 1 and the capacity " +
                                   std::to_string(limit.capacity()) + ", got " +
                                   std::to_string(terms.units));
  }
  if (terms.lifetime < std::chrono::milliseconds(1) || terms.lifetime > kMaxLeaseLifetime) {
    return Status::InvalidArgument("lease lifetime must be between 1ms and " +
                                   std::to_string(kMaxLeaseLifetime.count() / 1000) + "ms, got " +
                                   std::to_string(terms.lifetime.count()) + "us");
  }
  return Status::Ok();
}

namespace core {

// The in-process tables key by ScopedKey: every scope a store is given passed this check.
static_assert(kMaxScopeBytes <= base::kMaxScopedKeyScopeBytes);

Status ValidateScopeAndKey(std::string_view scope, std::string_view key) {
  if (scope.size() > kMaxScopeBytes) {
    return Status::InvalidArgument("limiter name is above the maximum of " +
                                   std::to_string(kMaxScopeBytes) + " bytes");
  }
  if (key.empty()) return Status::InvalidArgument("key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("key is " + std::to_string(key.size()) +
                                   " bytes, above the maximum " + std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

Status ValidateAll(std::span<const CheckRequest> requests) {
  if (requests.empty()) return Status::InvalidArgument("CheckAll needs at least one check");
  if (requests.size() > kMaxCheckAll) {
    return Status::InvalidArgument("CheckAll decides at most " + std::to_string(kMaxCheckAll) +
                                   " checks, got " + std::to_string(requests.size()));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const CheckRequest& r = requests[i];
    if (Status s = ValidateCheck(r); !s.ok()) return s;
    if (r.max_delay.count() != 0) {
      return Status::InvalidArgument("CheckAll does not book slots ahead (max_delay)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (requests[j].scope == r.scope && requests[j].key == r.key) {
        return Status::InvalidArgument("CheckAll got the limiter '" + std::string(r.scope) +
                                       "' twice for one key");
      }
    }
  }
  return Status::Ok();
}

}  // namespace core
}  // namespace sluice
