// The decision service's HTTP API as a function of a request's method, target and body, apart
// from any socket, so it can be unit-tested and fuzzed directly. The Api hands each request, once
// its caller may make it (below) and its method is the path's, to the handler of its path
// (http/handler.h: check_handler.h, acquire_handler.h, auth_handler.h, health_handler.h,
// ready_handler.h, metrics_handler.h, top_handler.h, dashboard_handler.h, json_route_handler.h,
// reset_handler.h):
//
//   POST /v1/check   {"rule":"api","key":"user:42","cost":1}  → 200 {"allowed":..., "source":
//                    "store", "degraded":false} ("source" names the path that decided: see
//                    DecisionSource; "degraded" is true when a failure policy did) plus the
//                    RateLimit-Policy, RateLimit (and when denied Retry-After) headers; a denied
//                    check is still 200: the service answers the question, it is not limiting.
//                    A rule in shadow mode answers "allowed":true, adding "shadow":true and
//                    "would_allow" (the verdict), with no Retry-After (http/api_json.h); on
//                    /v1/auth 204, and on /v1/acquire "admitted" at once, without waiting.
//                    {"checks":[{...},...]}  → 200 {"results":[...]}, in order, decided in one
//                    store round trip; an item that cannot be decided is {"error":"..."}.
//   POST /v1/acquire {"rule":"api","key":"user:42","cost":1,"max_wait_ms":5000} → answers when
//                    the request's turn comes, within max_wait_ms (at most kMaxAcquireWait):
//                    200 {"outcome":"admitted"|"denied"|"queue_full"|"cancelled","waited_ms":100,
//                    "decision":{as /v1/check}} with Server-Timing: ratelimit;dur=<ms waited>,
//                    and the RateLimit headers when the store decided (see sluice/acquirer.h:
//                    gcra, leaky_bucket and token_bucket book the slot; the window algorithms
//                    retry). "queue_full" is answered at once beyond a bound on the acquires in
//                    progress: the rule's per key (max_waiters_per_key) or in all (max_waiters),
//                    or the whole service's (SetMaxWaiters). "cancelled" answers the acquires
//                    still waiting when the service stops (CancelWaits; later ones get 503) or
//                    when their client leaves (Abandon). Needs the Api to be given Timers; 501
//                    otherwise.
//   ANY /v1/auth/{rule}  the auth subrequest of a reverse proxy, keyed by the rule's `key`
//                    from the request's headers: 204 allowed, 429 (or the rule's deny_status,
//                    403) denied, 401 nothing to key on (see http/auth_handler.h)
//   GET /healthz     200 while the process serves
//   GET /readyz      200 when the store's readiness probe (Store::ProbeAsync: a peek on an
//                    internal key) answers, else 503; through a ResilientStore, the backend's own
//                    answer (a failure policy must not make it look ready), 503 at once while the
//                    circuit breaker is open; with a StoreHealth, the breaker's state in the body
//   GET /metrics     Prometheus text exposition
//   GET /v1/top?rule=api&n=10  the keys denied most over the last minutes, per rule (all rules
//                    without `rule`; see http/top_keys_json.h), when SetExposeKeys allows it:
//                    403 otherwise, for keys are the clients' identities
//   GET / and /ui    the dashboard (see http/dashboard.h)
//   POST /json       envoyproxy/ratelimit's endpoint, when a rate limit service is set
//                    (SetJsonRoute; rls/json_endpoint.h), its metrics added to /metrics
//   DELETE /v1/keys/{rule}/{key}  forgets the key's state on the store: 204, 404 for an unknown
//                    rule, 503 when the store is out (http/reset_handler.h)
//
// A listener that serves only some endpoints (Request::endpoints: server.admin_listen) answers
// the others 404, as an unknown path, before any authentication: the decision port then tells
// nothing of the operators' endpoints, and the operators' port nothing of the decisions.
//
// With callers (SetCallers, auth/callers.h), every path but /healthz, /readyz, the dashboard's
// files (which hold no data) and unknown ones needs `Authorization: Bearer TOKEN` of a caller
// with the path's scope (check: /v1/check, /v1/acquire, /v1/auth, POST /json; admin: /v1/top,
// DELETE /v1/keys; metrics: /metrics) and,
// when the caller has a list of rules (or RLS domains), naming only those (for check, and for
// DELETE /v1/keys): 401 with
// WWW-Authenticate: Bearer without a token or with an unknown one, 403 outside its scopes or
// rules (a batch naming one rule it may not use is refused whole), and 429 while its address has
// failed too often (auth/auth_failures.h). A refused request reaches no handler and no store;
// /metrics counts it in sluice_auth_refused_total{reason}.
//
// Errors are {"error":"..."}: 400 bad JSON or check, 404 unknown path, 405 wrong method (with
// Allow), 413 body over kMaxBodyBytes; for a check or an acquire the store answered with an
// error instead of a decision (see middleware/refusal.h), 503 with Retry-After when it is out (no
// failure policy in front of it) or full, 500 for a fault (INTERNAL, e.g. a Lua script's error).
// Such an error is never turned into an answer that admits; a batch item gets it as its
// {"error":"..."}. Bad input changes no limiter state. With an admission (SetAdmission), a
// request that would take its connection past its share of the store's work in flight is
// answered 503 with Retry-After at once, and a batch is decided in parts as its share allows,
// the rest of its items {"error":"the service is busy: ..."} (core/fair_admission.h).
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange. The rule set
// is an immutable snapshot; SetRules swaps it atomically and calls in flight keep the one they
// started with. Every request must be answered before the Api is destroyed (CancelWaits ends the
// acquires waiting for a slot).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "auth/auth_failures.h"
#include "auth/callers.h"
#include "auth/refusal_counts.h"
#include "base/mutex.h"
#include "http/acquire_handler.h"
#include "http/answers.h"
#include "http/auth_handler.h"
#include "http/check_handler.h"
#include "http/dashboard_handler.h"
#include "http/exchange.h"
#include "http/handler.h"
#include "http/health_handler.h"
#include "http/json_route_handler.h"
#include "http/metrics.h"
#include "http/metrics_handler.h"
#include "http/ready_handler.h"
#include "http/reset_handler.h"
#include "http/rule_table.h"
#include "http/top_handler.h"
#include "http/top_keys.h"
#include "sluice/acquirer.h"
#include "sluice/store.h"
#include "sluice/store_health.h"

namespace sluice::http {

class Api {
 public:
  // `store` and `metrics` (and `health` and `timers`, when given) must outlive the Api. The rule
  // tables given here and to SetRules are built over `store` (RuleTable::Build). `health`, the
  // store's when it has one (a ResilientStore), adds the breaker to /readyz. `timers` is where
  // /v1/acquire waits.
  Api(Store& store, Metrics& metrics, std::shared_ptr<const RuleTable> rules,
      const StoreHealth* health = nullptr, Timers* timers = nullptr);

  void SetRules(std::shared_ptr<const RuleTable> rules);
  std::shared_ptr<const RuleTable> rules() const;

  // Answers `request` into exchange.response, then calls its on_done. What `request` points to
  // need only live until Handle returns. Returns true when the answer is still to come and waits
  // only for the request's turn (an acquire): the caller should then watch its client and call
  // Abandon if the client leaves.
  bool Handle(const Request& request, Exchange& exchange);

  // The client of the exchange's last request has gone: an acquire still waiting ends now,
  // answered "cancelled" through on_done as usual (see sluice/acquirer.h for what a cancelled
  // acquire keeps). Nothing for any other request. Call it from where Handle is called for this
  // exchange, after Handle has returned and before the next Handle.
  void Abandon(Exchange& exchange) { acquires_.Abandon(exchange); }

  // The response to a request the HTTP layer refused before it reached Handle (too large,
  // unparsable), counted like any other.
  void Refuse(int status, std::string_view message, Response& response) {
    answers_.Refuse(status, message, response);
  }

  // Answers every /v1/acquire still waiting with "cancelled", including those on the lines of
  // rules a reload has changed since, and answers those that arrive afterwards 503 at once, so
  // that a drain need not wait for their slots. For a drain: it cannot be undone.
  void CancelWaits() { acquires_.CancelWaits(); }

  // Bounds the acquires in progress over every rule (default AcquirerOptions::max_waiters).
  void SetMaxWaiters(size_t max_waiters) { acquires_.SetMaxWaiters(max_waiters); }

  // Whether GET /v1/top shows the keys denied most (default: no, it answers 403).
  void SetExposeKeys(bool expose) { top_.SetExposeKeys(expose); }

  // Who may call, and what (auth/callers.h); swapped atomically, as SetRules. Unset or not
  // enabled: anyone may call anything.
  void SetCallers(std::shared_ptr<const auth::CallerTable> callers);

  // Admits the store work of /v1/check, /v1/auth, /v1/acquire and /json by caller
  // (core/fair_admission.h); `admission` must outlive the Api. None by default. Set before
  // serving.
  void SetAdmission(core::FairAdmission* admission) { answers_.SetAdmission(admission); }

  // Where the service counts, for the HTTP layer's own counts (connections).
  Metrics& metrics() { return metrics_; }
  // A front end beside this API's own (the Envoy rate limit service): what answers POST /json,
  // calling `done` once with the status and the JSON body (http/json_route_handler.h), and more
  // /metrics lines. Set both before serving. `caller` is the request's (Request::caller), for the
  // same admission.
  using JsonDone = http::JsonDone;
  using JsonRoute = http::JsonRoute;
  void SetJsonRoute(JsonRoute route, std::function<std::string()> metrics) {
    json_route_.emplace(std::move(route), answers_);
    metrics_handler_.SetFrontEnd(std::move(metrics));
  }

 private:
  // The handler of a path and the method it takes (empty: any); no handler: no such path.
  struct Routed {
    Handler* handler;
    std::string_view method;
  };
  Routed Route(std::string_view path);
  // Whether the request may go on to its route; answers it (401, 403, 429) when not. `who`, when
  // given, is set to the caller's name and address, for the log of what it changes.
  bool Authorize(const Request& request, std::string_view path, Exchange& exchange,
                 std::string* who);
  // Answers 404: no such path on this listener.
  void NotFound(Endpoints endpoints, Exchange& exchange);
  void RefuseCaller(auth::AuthRefusal refusal, std::string_view message, Exchange& exchange);

  Metrics& metrics_;
  auth::AuthFailures auth_failures_;
  auth::RefusalCounts auth_refusals_;
  mutable base::Mutex rules_mu_;
  std::shared_ptr<const RuleTable> rules_ SLUICE_GUARDED_BY(rules_mu_);
  std::shared_ptr<const auth::CallerTable> callers_ SLUICE_GUARDED_BY(rules_mu_);
  TopKeys top_keys_{SystemClock::Instance()};
  Answers answers_{metrics_, top_keys_};
  CheckHandler checks_;
  AuthHandler auths_;
  AcquireHandler acquires_;
  ReadyHandler ready_;
  TopHandler top_{top_keys_, answers_};
  ResetHandler resets_;
  HealthHandler health_{answers_};
  DashboardHandler dashboard_{answers_};
  MetricsHandler metrics_handler_{metrics_, auth_refusals_, answers_};
  std::optional<JsonRouteHandler> json_route_;  // POST /json, when SetJsonRoute gave one
};

}  // namespace sluice::http
