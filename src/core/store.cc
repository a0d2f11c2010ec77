#include "sluice/store.h"

#include <string>

#include "core/await.h"
#include "core/names.h"

namespace sluice {

namespace {

constexpr core::EnumName<DecisionSource> kDecisionSourceNames[] = {
    {DecisionSource::kStore, "store"},
    {DecisionSource::kHotKeyCache, "hot_key_cache"},
    {DecisionSource::kFailOpen, "fail_open"},
    {DecisionSource::kFailClosed, "fail_closed"},
    {DecisionSource::kLocalFallback, "local_fallback"},
};

constexpr core::EnumName<FailurePolicy> kFailurePolicyNames[] = {
    {FailurePolicy::kFailOpen, "fail_open"},
    {FailurePolicy::kFailClosed, "fail_closed"},
    {FailurePolicy::kLocalFallback, "local_fallback"},
};

}  // namespace

const char* DecisionSourceName(DecisionSource source) {
  return core::NameOf(kDecisionSourceNames, source);
}

const char* FailurePolicyName(FailurePolicy policy) {
  return core::NameOf(kFailurePolicyNames, policy);
}

Result<FailurePolicy> ParseFailurePolicy(std::string_view name) {
  if (auto policy = core::ParseName(kFailurePolicyNames, name)) return *policy;
  return Status::InvalidArgument("unknown failure policy '" + std::string(name) + "' (expected " +
                                 core::NameList(kFailurePolicyNames) + ")");
}

bool IsStoreOutage(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kDeadlineExceeded;
}

Duration MaxDelayOf(const Limit& limit) {
  // Compared by division: interval × kMaxCount may not fit in 64 bits.
  if (limit.emission_interval() > Limit::kMaxPeriod / Limit::kMaxCount) return Limit::kMaxPeriod;
  return limit.emission_interval() * Limit::kMaxCount;
}

namespace {

// What a check and a reset both name.
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

}  // namespace

Status ValidateCheck(const CheckRequest& request) {
  if (request.limit == nullptr) return Status::InvalidArgument("check without a limit");
  if (Status s = ValidateScopeAndKey(request.scope, request.key); !s.ok()) return s;
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
  return Status::Ok();
}

Result<Decision> Store::Check(const CheckRequest& request) {
  if (Status s = ValidateCheck(request); !s.ok()) return s;
  return DoCheck(request);
}

void Store::CheckAsync(const CheckRequest& request, DecisionCallback done) {
  if (Status s = ValidateCheck(request); !s.ok()) return done(std::move(s));
  DoCheckAsync(request, std::move(done));
}

namespace {

// Splits a batch into the requests that are valid, and the errors of the others.
struct ValidatedBatch {
  std::vector<CheckRequest> valid;
  std::vector<Result<Decision>> results;  // errors in place; placeholders for the valid ones
  std::vector<size_t> valid_index;        // position of valid[i] in results

  explicit ValidatedBatch(std::span<const CheckRequest> requests) {
    results.reserve(requests.size());
    for (const auto& r : requests) {
      Status s = ValidateCheck(r);
      if (s.ok()) {
        valid_index.push_back(results.size());
        valid.push_back(r);
        results.emplace_back(Status::Internal("not decided"));
      } else {
        results.emplace_back(std::move(s));
      }
    }
  }

  std::vector<Result<Decision>> Merge(std::vector<Result<Decision>> decided) {
    for (size_t i = 0; i < decided.size(); ++i) results[valid_index[i]] = std::move(decided[i]);
    return std::move(results);
  }
};

}  // namespace

std::vector<Result<Decision>> Store::CheckBatch(std::span<const CheckRequest> requests) {
  ValidatedBatch batch(requests);
  if (batch.valid.empty()) return std::move(batch.results);
  return batch.Merge(DoCheckBatch(batch.valid));
}

void Store::CheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  auto batch = std::make_shared<ValidatedBatch>(requests);
  if (batch->valid.empty()) return done(std::move(batch->results));
  DoCheckBatchAsync(batch->valid, [batch, done = std::move(done)](auto decided) {
    done(batch->Merge(std::move(decided)));
  });
}

namespace {

// What CheckAll requires beyond each request being valid.
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

}  // namespace

Result<std::vector<Decision>> Store::CheckAll(std::span<const CheckRequest> requests) {
  if (Status s = ValidateAll(requests); !s.ok()) return s;
  return DoCheckAll(requests);
}

void Store::CheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  if (Status s = ValidateAll(requests); !s.ok()) return done(std::move(s));
  DoCheckAllAsync(requests, std::move(done));
}

Result<std::vector<Decision>> Store::DoCheckAll(std::span<const CheckRequest> requests) {
  return core::Await<Result<std::vector<Decision>>>(
      [&](auto done) { DoCheckAllAsync(requests, std::move(done)); });
}

Status Store::Reset(std::string_view scope, std::string_view key) {
  if (Status s = ValidateScopeAndKey(scope, key); !s.ok()) return s;
  return DoReset(scope, key);
}

void Store::ResetAsync(std::string_view scope, std::string_view key, StatusCallback done) {
  if (Status s = ValidateScopeAndKey(scope, key); !s.ok()) return done(std::move(s));
  DoResetAsync(scope, key, std::move(done));
}

std::vector<Result<Decision>> Store::DoCheckBatch(std::span<const CheckRequest> requests) {
  return core::Await<std::vector<Result<Decision>>>(
      [&](auto done) { DoCheckBatchAsync(requests, std::move(done)); });
}

Status Store::DoReset(std::string_view scope, std::string_view key) {
  return core::Await<Status>([&](auto done) { DoResetAsync(scope, key, std::move(done)); });
}

namespace {

// '#' cannot appear in a limiter name of `sluice serve` (a rule name), so no rule shares its state.
constexpr std::string_view kProbeScope = "#sluice";
constexpr std::string_view kProbeKey = "readyz";

}  // namespace

CheckRequest Store::ReadinessProbe() {
  static const Limit limit =
      Limit::Create(Algorithm::kFixedWindow, 1, std::chrono::seconds(1)).value();
  return {.scope = kProbeScope, .limit = &limit, .key = kProbeKey, .cost = 0};
}

void Store::ProbeAsync(DecisionCallback done) { CheckAsync(ReadinessProbe(), std::move(done)); }

Result<Decision> Store::DoCheck(const CheckRequest& request) {
  return std::move(DoCheckBatch({&request, 1}).front());
}

void Store::DoCheckAsync(const CheckRequest& request, DecisionCallback done) {
  DoCheckBatchAsync({&request, 1},
                    [done = std::move(done)](auto results) { done(std::move(results.front())); });
}

}  // namespace sluice
