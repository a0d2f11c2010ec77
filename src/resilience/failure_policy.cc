#include "resilience/failure_policy.h"

#include <algorithm>
#include <optional>

namespace sluice::resilience {

Result<Limit> LocalShare(const Limit& limit, int64_t instances) {
  const auto share = [instances](int64_t v) { return std::max<int64_t>(1, v / instances); };
  return Limit::Create(
      limit.algorithm(), share(limit.count()), limit.period(),
      IsMeter(limit.algorithm()) ? std::optional(share(limit.capacity())) : std::nullopt);
}

FailurePolicies::FailurePolicies(const ResilientStoreOptions& options, const Clock& clock)
    : instances_(options.instances),
      open_for_(options.open_for),
      fallback_(MemoryStoreOptions{.clock = &clock, .max_keys = options.fallback_max_keys}) {}

Decision FailurePolicies::Closed(const Limit& limit) const {
  return {.allowed = false,
          .limit = limit.count(),
          .retry_after = open_for_,
          .source = DecisionSource::kFailClosed};
}

Decision FailurePolicies::Decide(const CheckRequest& request) {
  const Limit& limit = *request.limit;
  switch (request.on_error) {
    case FailurePolicy::kFailOpen:
      return {.allowed = true, .limit = limit.count(), .source = DecisionSource::kFailOpen};
    case FailurePolicy::kFailClosed:
      return Closed(limit);
    case FailurePolicy::kLocalFallback:
      break;
  }
  Result<Decision> local = Status::Internal("no local limit");
  if (auto share = LocalShare(limit, instances_); share.ok()) {
    CheckRequest shared = request;
    shared.limit = &*share;
    shared.max_delay = std::min(request.max_delay, MaxDelayOf(*share));
    shared.lease = {};  // terms of the shared limit, which may not fit the share
    local = fallback_.Check(shared);
  }
  Decision decided = local.ok() ? *local : Closed(limit);  // a cost above the share never fits
  decided.limit = limit.count();
  decided.source = DecisionSource::kLocalFallback;
  return decided;
}

std::vector<Decision> FailurePolicies::DecideAll(std::span<const CheckRequest> requests) {
  bool admitted = std::none_of(requests.begin(), requests.end(), [](const CheckRequest& r) {
    return r.on_error == FailurePolicy::kFailClosed;
  });
  // The local fallback's answer for each local_fallback request, in order.
  std::vector<Limit> shares;
  std::vector<CheckRequest> local;
  shares.reserve(requests.size());
  for (const CheckRequest& r : requests) {
    if (r.on_error != FailurePolicy::kLocalFallback) continue;
    auto share = LocalShare(*r.limit, instances_);
    if (!share.ok()) {
      admitted = false;
      break;
    }
    shares.push_back(*share);
    local.push_back(r);
    local.back().limit = &shares.back();
    local.back().lease = {};
  }
  std::vector<Decision> local_decisions;
  if (admitted && !local.empty()) {
    auto decided = fallback_.CheckAll(local);  // a cost above a share never fits: denied
    if (decided.ok()) local_decisions = std::move(*decided);
    admitted = decided.ok() && std::all_of(local_decisions.begin(), local_decisions.end(),
                                           [](const Decision& d) { return d.allowed; });
  }
  std::vector<Decision> decisions;
  decisions.reserve(requests.size());
  size_t next_local = 0;
  for (const CheckRequest& r : requests) {
    Decision d{.allowed = admitted, .limit = r.limit->count()};
    switch (r.on_error) {
      case FailurePolicy::kFailOpen:
        d.source = DecisionSource::kFailOpen;
        break;
      case FailurePolicy::kFailClosed:
        d.source = DecisionSource::kFailClosed;
        d.retry_after = open_for_;
        break;
      case FailurePolicy::kLocalFallback:
        if (next_local < local_decisions.size()) d = local_decisions[next_local++];
        d.limit = r.limit->count();
        d.source = DecisionSource::kLocalFallback;
        if (d.allowed != admitted) {  // another request refused: report what a peek sees
          d.allowed = false;
          d.retry_after = Duration(0);
        }
        if (local_decisions.empty() && !admitted) d.retry_after = open_for_;
        break;
    }
    decisions.push_back(d);
  }
  return decisions;
}

void FailurePolicies::Forget(std::string_view scope, std::string_view key) {
  // Best effort: the backend's answer is the reset's.
  (void)fallback_.Reset(scope, key);
}

}  // namespace sluice::resilience
