// The answering of a ShouldRateLimit (rls/service.h): from the store's decisions on a Plan's
// checks (rls/plan.h) to the RateLimitResponse, its response_headers_to_add and the stats.
//
//  - A descriptor's status reports its most constrained limit: the one over the limit, else the
//    one with the fewest remaining. Over the limit means denied on its own account (a
//    retry_after), not merely held back by another descriptor.
//  - The headers: the IETF RateLimit-Policy and RateLimit (and Retry-After when over the limit)
//    of the most constrained descriptor, and optionally envoyproxy/ratelimit's X-RateLimit-*.
//
// Functions of their arguments; `stats` is thread-safe (rls/stats.h).
#pragma once

#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls/plan.h"

namespace sluice::rls {

class Stats;

// One descriptor's verdict, as reported.
struct Verdict {
  const LimitCheck* reported = nullptr;  // its most constrained limit; null without one
  Decision decision;
  bool over = false;
};

// Every descriptor's verdict on the decisions of `plan`'s groups, which must all be values.
std::vector<Verdict> VerdictsOf(const Plan& plan);

// Writes the answer of `plan` to `response`, and records each descriptor's outcome in `stats`.
void Answer(const Plan& plan, const std::vector<Verdict>& verdicts, Stats& stats,
            pb::RateLimitResponse& response);

// Writes the answer to a call that the instance's admission refused (core/fair_admission.h):
// OVER_LIMIT for each of its `descriptors`, with Retry-After. Never an error: Envoy's
// failure_mode_deny, false by default, would let the request through.
void AnswerBusy(int descriptors, int retry_after_seconds, pb::RateLimitResponse& response);

}  // namespace sluice::rls
