// /v1/auth/{rule}, any method: the auth subrequest of a reverse proxy (nginx auth_request,
// Traefik forwardAuth, Caddy forward_auth) checked against a rule that has a `key` (see
// http/auth_key.h for where the key comes from). One check of cost 1, built by the rule's Limiter
// and decided by the store as POST /v1/check decides (and so, behind a ResilientStore, by the
// rule's failure policy while the store is out). The answers:
//
//   204                  allowed, with RateLimit-Policy and RateLimit; always, for a rule in
//                        shadow mode (its would-be denial counted, no Retry-After)
//   429 (or 403)         denied, with Retry-After, RateLimit-Policy and RateLimit; 403 when the
//                        rule says `deny_status: 403`, for nginx, whose auth_request takes only
//                        2xx, 401 and 403 from its auth server
//   401                  the request has nothing to key on: a header the key names is missing,
//                        or a client address came from a peer that is not a trusted proxy
//   404                  no such rule, or the rule has no key
//   503, 500             the store answered with an error instead of a decision (as /v1/check)
//
// A refusal's body is {"error":"..."}. The proxy passes the RateLimit headers on to its client
// (examples/nginx, examples/traefik, examples/caddy).
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include <string_view>

#include "http/answers.h"
#include "http/handler.h"
#include "http/metrics.h"
#include "http/rule_check.h"
#include "sluice/store.h"

namespace sluice::http {

inline constexpr std::string_view kAuthPathPrefix = "/v1/auth/";

class AuthHandler final : public Handler {
 public:
  // `store` is the one the rules are built over; it, `metrics` and `answers` must outlive this
  // object.
  AuthHandler(Store& store, Metrics& metrics, Answers& answers);

  // The rule is what follows kAuthPathPrefix in the path; the key is taken from what the request
  // shows of its peer and headers (Request::client; none: no key).
  bool Handle(Call& call, Exchange& exchange) override;

 private:
  Answers& answers_;
  RuleCheck check_;
};

}  // namespace sluice::http
