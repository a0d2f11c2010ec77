#include "sluice/store.h"

#include <algorithm>
#include <string>

#include "base/await.h"
#include "core/check_request.h"

namespace sluice {

Result<Decision> Store::Check(const CheckRequest& request) {
  if (Status s = ValidateCheck(request); !s.ok()) return s;
  return std::move(base::Await<std::vector<Result<Decision>>>([&](auto done) {
                     DoCheckBatchAsync({&request, 1}, std::move(done));
                   }).front());
}

void Store::CheckAsync(const CheckRequest& request, DecisionCallback done) {
  if (Status s = ValidateCheck(request); !s.ok()) return done(std::move(s));
  DoCheckBatchAsync({&request, 1}, [done = std::move(done)](std::vector<Result<Decision>> results) {
    done(std::move(results.front()));
  });
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
  return base::Await<std::vector<Result<Decision>>>(
      [&](auto done) { CheckBatchAsync(requests, std::move(done)); });
}

void Store::CheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  if (std::all_of(requests.begin(), requests.end(),
                  [](const CheckRequest& r) { return ValidateCheck(r).ok(); })) {
    if (requests.empty()) return done({});
    return DoCheckBatchAsync(requests, std::move(done));
  }
  auto batch = std::make_shared<ValidatedBatch>(requests);
  if (batch->valid.empty()) return done(std::move(batch->results));
  DoCheckBatchAsync(batch->valid, [batch, done = std::move(done)](auto decided) {
    done(batch->Merge(std::move(decided)));
  });
}

Result<std::vector<Decision>> Store::CheckAll(std::span<const CheckRequest> requests) {
  return base::Await<Result<std::vector<Decision>>>(
      [&](auto done) { CheckAllAsync(requests, std::move(done)); });
}

void Store::CheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  if (Status s = core::ValidateAll(requests); !s.ok()) return done(std::move(s));
  DoCheckAllAsync(requests, std::move(done));
}

Status Store::Reset(std::string_view scope, std::string_view key) {
  return base::Await<Status>([&](auto done) { ResetAsync(scope, key, std::move(done)); });
}

void Store::ResetAsync(std::string_view scope, std::string_view key, StatusCallback done) {
  if (Status s = core::ValidateScopeAndKey(scope, key); !s.ok()) return done(std::move(s));
  DoResetAsync(scope, key, std::move(done));
}

int64_t UnitsGivenBack(int64_t units, Time apply_by, Time now, Duration interval) {
  if (now <= apply_by) return units;
  const int64_t late = (now - apply_by).count();
  const int64_t step = interval.count();
  const int64_t wasted = late / step + (late % step != 0);
  return wasted >= units ? 0 : units - wasted;
}

namespace {

Status ValidateGiveBack(std::string_view scope, const Limit& limit, std::string_view key,
                        int64_t units) {
  if (Status s = core::ValidateScopeAndKey(scope, key); !s.ok()) return s;
  if (!IsMeter(limit.algorithm())) {
    return Status::InvalidArgument(
        "only token_bucket, leaky_bucket and gcra give units back, not " +
        std::string(AlgorithmName(limit.algorithm())));
  }
  if (units < 1 || units > limit.capacity()) {
    return Status::InvalidArgument("units to give back must be between 1 and the capacity " +
                                   std::to_string(limit.capacity()) + ", got " +
                                   std::to_string(units));
  }
  return Status::Ok();
}

}  // namespace

Status Store::GiveBack(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by) {
  return base::Await<Status>(
      [&](auto done) { GiveBackAsync(scope, limit, key, units, std::move(done), apply_by); });
}

void Store::GiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                          int64_t units, StatusCallback done, Time apply_by) {
  if (Status s = ValidateGiveBack(scope, limit, key, units); !s.ok()) return done(std::move(s));
  DoGiveBackAsync(scope, limit, key, units, apply_by, std::move(done));
}

void Store::DoGiveBackAsync(std::string_view /*scope*/, const Limit& /*limit*/,
                            std::string_view /*key*/, int64_t /*units*/, Time /*apply_by*/,
                            StatusCallback done) {
  done(Status::InvalidArgument("this store cannot give units back"));
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

}  // namespace sluice
