// The Envoy rate limit service's decision, ShouldRateLimit, apart from gRPC: a RateLimitRequest
// is matched against envoyproxy/ratelimit's configuration (rls/matcher.h), turned into store
// checks, each built by a Limiter (Limiter::Request) as every check of a limit is, decided, and
// answered as a RateLimitResponse. The checks are planned in rls/plan.h, the response answered
// in rls/answer.h.
//
//  - hits: a descriptor's own hits_addend when set (0 peeks: checks without consuming), else the
//    request's hits_addend, 0 meaning 1 as Envoy sends it.
//  - Descriptors that match no limit, or an unlimited one, are OK and count nothing. A descriptor
//    with is_negative_hits is refused (INVALID_ARGUMENT): no store gives hits back.
//  - Every limit of every enforced descriptor is decided in one Store::CheckAll: a request that
//    is over any limit consumes nothing from the others (on a Redis Cluster too: a CheckAll
//    across masters peeks at each, then charges each; see docs/failure-modes.md for the race
//    that can only under-admit). Descriptors in shadow mode (per
//    descriptor, or every one with the service's shadow_mode) are decided in a second CheckAll
//    of their own, so they count as if enforced but never deny, nor block the enforced ones.
//    Two descriptors landing on one counter are one check with their hits added up (the first
//    descriptor's limit decides). A limit of 0 requests, or hits above a limit's capacity, is
//    over the limit without asking the store; the request's other checks are then only peeked.
//  - Quota mode (per descriptor, or every one but the unlimited with the service's quota_mode):
//    as in that service, descriptors in quota mode deny the request only when every one of them
//    is over (one that matches no limit never is). A request refused only because some of its
//    quotas are over is decided once more without them, and then consumes from the others;
//    those over report OVER_LIMIT and consume nothing. A second refusal is the answer (another
//    request raced it), so a request costs at most two CheckAlls of its enforced descriptors.
//  - A descriptor's status reports its most constrained limit: the one over the limit, else the
//    one with the fewest remaining. Over the limit means denied on its own account (a
//    retry_after), not merely held back by another descriptor.
//  - The store: behind a ResilientStore its outage is decided by each limit's on_error, or the
//    service's default when the rule sets none; with no default (on_error: error), a decision
//    a failure policy made is answered with UNAVAILABLE instead, for Envoy's failure_mode_deny
//    to decide. Any other store error is returned as it is.
//  - response_headers_to_add: the IETF RateLimit-Policy and RateLimit (and Retry-After when over
//    the limit) of the most constrained descriptor, and optionally envoyproxy/ratelimit's
//    X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.
//
// Thread safety: ShouldRateLimit may be called concurrently; SetConfig swaps the configuration
// atomically and calls in flight keep the one they started with.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "base/mutex.h"
#include "core/fair_admission.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls/matcher.h"
#include "sluice/store.h"

namespace sluice::rls {

namespace pb = envoy::service::ratelimit::v3;

class Stats;

struct ServiceOptions {
  // Every descriptor in shadow mode: decided and counted, always OK.
  bool shadow_mode = false;
  // Every descriptor in quota mode (but the unlimited ones): over the limit only together.
  bool quota_mode = false;
  // Also send envoyproxy/ratelimit's X-RateLimit-* headers.
  bool x_ratelimit_headers = false;
  // The failure policy of a limit whose rule sets no on_error; nullopt: an error to the caller.
  std::optional<FailurePolicy> default_on_error = FailurePolicy::kFailOpen;
};

// What a configuration reload swaps: the matcher and the options, together.
struct ServiceConfig {
  Matcher matcher;
  ServiceOptions options;
};

class Service {
 public:
  // `store` and `stats` must outlive the service.
  Service(Store& store, Stats& stats, std::shared_ptr<const ServiceConfig> config);

  void SetConfig(std::shared_ptr<const ServiceConfig> config);
  std::shared_ptr<const ServiceConfig> config() const;

  // Decides `request` into `response`, then calls `done` once, on this thread or a store thread,
  // with OK or the error to answer instead (INVALID_ARGUMENT for a bad request, the store's
  // errors). `request` and `response` must live until then. With an admission set, the call's
  // checks are admitted for `caller` (core/fair_admission.h); a call refused is answered
  // OVER_LIMIT with Retry-After, its store untouched.
  void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse& response,
                       std::function<void(Status)> done, core::FairAdmission::Caller caller = 0);

  // Where the calls' checks are admitted; `admission` must outlive the service. None by default.
  void SetAdmission(core::FairAdmission* admission) { admission_.store(admission); }

 private:
  Store& store_;
  Stats& stats_;
  std::atomic<core::FairAdmission*> admission_{nullptr};
  mutable base::Mutex mu_;
  std::shared_ptr<const ServiceConfig> config_ SLUICE_GUARDED_BY(mu_);
};

}  // namespace sluice::rls
