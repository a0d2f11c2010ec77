// The RateLimit-Policy, RateLimit and Retry-After response header values for one decision, as
// defined by the IETF httpapi draft "RateLimit header fields for HTTP",
// draft-ietf-httpapi-ratelimit-headers-10: both fields are Structured Field Lists (RFC 9651) of
// one item, the policy name as an sf-string, with parameters
//
//   RateLimit-Policy: "api";q=100;w=60    q: the quota, w: the seconds it takes to come back
//   RateLimit: "api";r=99;t=1             r: units remaining, t: seconds until more is available
//   Retry-After: 3                        (RFC 9110) only when denied: seconds until a retry passes
//
// `t` is "the number of seconds until additional quota is made available" (draft-10; earlier
// drafts meant until the quota resets): Decision::replenish_after, when one more unit than `r`
// fits, 0 when nothing is spent. Retry-After never names a time earlier than `t` (draft-10,
// section 6): it is the later of the decision's retry_after and replenish_after.
// The window is the time a spent capacity (count for the window algorithms, the burst for
// token_bucket, leaky_bucket and gcra) takes to refill, and the quota what refills in it: r,
// which counts down from the capacity, never exceeds q (100/min with a burst of 20: q=20;w=12).
// Seconds are whole and rounded up, so a client that waits them is never early. Pure functions;
// thread-safe. Shared by `sluice serve` and the HTTP middleware.
#pragma once

#include <string>
#include <string_view>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::middleware {

// RateLimit-Policy depends on the limit only, so a caller serving many requests under one policy
// formats it once.
std::string RateLimitPolicyValue(std::string_view policy_name, const Limit& limit);
std::string RateLimitValue(std::string_view policy_name, const Decision& decision);
std::string RetryAfterValue(const Decision& decision);

// A duration in whole seconds, rounded up.
int64_t CeilSeconds(Duration d);

// The Server-Timing entry (W3C Server Timing) for the time a request waited for its rate-limit
// slot: `ratelimit;dur=100.000`, milliseconds with microsecond precision.
std::string ServerTimingValue(Duration waited);

}  // namespace sluice::middleware
