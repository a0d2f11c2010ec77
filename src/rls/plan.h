// The planning of a ShouldRateLimit (rls/service.h): from a RateLimitRequest to the store checks
// to run. Each descriptor is matched (rls/matcher.h) and its limits become checks, built by a
// Limiter each, in one group per Store::CheckAll: the enforced descriptors' and, apart, those in
// shadow mode. Two descriptors landing on one counter are one check with their hits added up. A
// limit of 0 requests, or hits above a limit's capacity, is over the limit here, without asking
// the store; the plan then only peeks at the request's other checks, or, when only quotas are
// over, decides the rest in a group of their own.
//
// A plain value of one call, not synchronised: the store's callbacks each write their own
// group's decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls/matcher.h"
#include "rls/service.h"
#include "sluice/limiter.h"
#include "sluice/store.h"

namespace sluice::rls {

// No request, or no group.
inline constexpr size_t kNone = std::numeric_limits<size_t>::max();

// One limit of one descriptor, and where it is decided.
struct LimitCheck {
  size_t descriptor = 0;
  const RateLimitSpec* spec = nullptr;
  size_t group = 0;  // index in Plan::groups
  bool shadow = false;
  size_t request = kNone;  // index in its group's requests; kNone: over the limit here
  bool error_if_degraded = false;
};

// The checks decided by one Store::CheckAll: the enforced descriptors' or the shadow ones'.
struct CheckGroup {
  bool shadow = false;
  std::vector<CheckRequest> requests;
  std::vector<bool> over_here;  // per request: its cost is above the limit's capacity
  bool any_over_here = false;
  Result<std::vector<Decision>> decisions = std::vector<Decision>{};
};

class Plan {
 public:
  // `store`, `config` and `request` must outlive the plan, which is not moved once built: its
  // requests point into it.
  Plan(Store& store, const ServiceConfig& config, const pb::RateLimitRequest& request)
      : store_(store), config_(config), request_(request) {}

  // Matches the request and plans its checks; INVALID_ARGUMENT for a bad request.
  Status Build();

  // Whether `descriptor` is in shadow mode: decided and counted, never denying.
  bool Shadow(size_t descriptor) const;
  // Whether `descriptor` is in quota mode: over the limit only together with the other quotas.
  bool Quota(size_t descriptor) const;
  // Whether the descriptors `over` their limits deny the request: any enforced one does, unless
  // it is in quota mode; those in quota mode deny it together, when every one of them is over.
  template <typename Over>
  bool Denies(Over over) const;
  // Whether the store refused the enforced checks (all or nothing: then none consumed anything).
  bool EnforcedRefused() const;
  // The checks of `group` whose descriptor is not `over` move to a new group with their
  // requests, which decides them from then on; the others stay, with the group's decisions.
  // Returns the new group.
  template <typename Over>
  size_t Split(size_t group, Over over);

  const ServiceOptions& options() const { return config_.options; }

  // Per descriptor.
  std::vector<rls::Match> matches;
  std::vector<uint64_t> hits;
  std::vector<std::string> counter_keys;
  std::vector<std::string> stats_keys;
  std::vector<std::vector<size_t>> checks_of;  // its LimitChecks
  // Per LimitCheck, reserved up front: the requests point into scopes and limiters.
  std::vector<std::string> scopes;
  std::vector<Limiter> limiters;
  std::vector<LimitCheck> checks;
  std::vector<CheckGroup> groups;
  size_t enforced = kNone;  // the group deciding the enforced descriptors' checks

 private:
  uint64_t HitsOf(const envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d) const;
  size_t GroupFor(bool shadow);
  void AddCheck(size_t descriptor, const RateLimitSpec& spec, size_t index, bool shadow);
  bool OverHere(const LimitCheck& check) const;

  Store& store_;
  const ServiceConfig& config_;
  const pb::RateLimitRequest& request_;
};

template <typename Over>
bool Plan::Denies(Over over) const {
  bool quotas = false, every_quota_over = true;
  for (size_t d = 0; d < matches.size(); ++d) {
    const bool denies = over(d) && !Shadow(d);
    if (!Quota(d)) {
      if (denies) return true;
      continue;
    }
    quotas = true;
    every_quota_over = every_quota_over && denies;
  }
  return quotas && every_quota_over;
}

template <typename Over>
size_t Plan::Split(size_t group, Over over) {
  CheckGroup split;
  split.shadow = groups[group].shadow;
  std::vector<size_t> moved_to(groups[group].requests.size(), kNone);
  for (LimitCheck& check : checks) {
    if (check.group != group || check.request == kNone || over(check.descriptor)) continue;
    size_t& to = moved_to[check.request];
    if (to == kNone) {
      to = split.requests.size();
      split.requests.push_back(groups[group].requests[check.request]);
      split.over_here.push_back(groups[group].over_here[check.request]);
    }
    check.request = to;
    check.group = groups.size();
  }
  groups.push_back(std::move(split));
  return groups.size() - 1;
}

}  // namespace sluice::rls
