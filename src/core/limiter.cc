#include "sluice/limiter.h"

#include <utility>

namespace sluice {

Limiter::Limiter(Store& store, std::string name, Limit limit, FailurePolicy on_error,
                 LeaseTerms lease)
    : store_(store), name_(std::move(name)), limit_(limit), on_error_(on_error), lease_(lease) {}

CheckRequest Limiter::Request(std::string_view key, int64_t cost, Duration max_delay) const {
  return CheckRequest{.scope = name_,
                      .limit = &limit_,
                      .key = key,
                      .cost = cost,
                      .on_error = on_error_,
                      .max_delay = max_delay,
                      .lease = max_delay.count() == 0 ? lease_ : LeaseTerms{}};
}

std::vector<CheckRequest> Limiter::Requests(std::span<const KeyCost> checks) const {
  std::vector<CheckRequest> requests;
  requests.reserve(checks.size());
  for (const auto& c : checks) requests.push_back(Request(c.key, c.cost, c.max_delay));
  return requests;
}

Result<Decision> Limiter::Check(std::string_view key, int64_t cost) const {
  return store_.Check(Request(key, cost));
}

void Limiter::CheckAsync(std::string_view key, int64_t cost, DecisionCallback done) const {
  store_.CheckAsync(Request(key, cost), std::move(done));
}

Result<Decision> Limiter::Reserve(std::string_view key, int64_t cost, Duration max_delay) const {
  return store_.Check(Request(key, cost, max_delay));
}

void Limiter::ReserveAsync(std::string_view key, int64_t cost, Duration max_delay,
                           DecisionCallback done) const {
  store_.CheckAsync(Request(key, cost, max_delay), std::move(done));
}

std::vector<Result<Decision>> Limiter::CheckBatch(std::span<const KeyCost> checks) const {
  return store_.CheckBatch(Requests(checks));
}

void Limiter::CheckBatchAsync(std::span<const KeyCost> checks, BatchCallback done) const {
  store_.CheckBatchAsync(Requests(checks), std::move(done));
}

Status Limiter::Reset(std::string_view key) const { return store_.Reset(name_, key); }

}  // namespace sluice
