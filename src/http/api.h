// The decision service's HTTP API as a function of a request's method, target and body, apart
// from any socket, so it can be unit-tested and fuzzed directly:
//
//   POST /v1/check   {"rule":"api","key":"user:42","cost":1}  → 200 {"allowed":..., "source":
//                    "store", "degraded":false} ("source" names the path that decided: see
//                    DecisionSource; "degraded" is true when a failure policy did) plus the
//                    RateLimit-Policy, RateLimit (and when denied Retry-After) headers; a denied
//                    check is still 200: the service answers the question, it is not limiting.
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
//
// Errors are {"error":"..."}: 400 bad JSON or check, 404 unknown path, 405 wrong method (with
// Allow), 413 body over kMaxBodyBytes; for a check or an acquire the store answered with an
// error instead of a decision (see middleware/refusal.h), 503 with Retry-After when it is out (no
// failure policy in front of it) or full, 500 for a fault (INTERNAL, e.g. a Lua script's error).
// Such an error is never turned into an answer that admits; a batch item gets it as its
// {"error":"..."}. Bad input changes no limiter state.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange. The rule set
// is an immutable snapshot; SetRules swaps it atomically and calls in flight keep the one they
// started with. Every request must be answered before the Api is destroyed (CancelWaits ends the
// acquires waiting for a slot).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "core/mutex.h"
#include "http/metrics.h"
#include "http/top_keys.h"
#include "sluice/acquirer.h"
#include "sluice/limit.h"
#include "sluice/store.h"
#include "sluice/store_health.h"

namespace sluice::http {

inline constexpr size_t kMaxBodyBytes = 64 * 1024;
inline constexpr size_t kMaxBatchChecks = 1000;
inline constexpr Duration kMaxAcquireWait = std::chrono::minutes(5);

struct Request {
  std::string_view method;
  std::string_view target;
  std::string_view body;
};

struct Header {
  std::string_view name;  // a string literal
  std::string value;
};

// Reused from one request to the next: Reset keeps the strings' capacity.
struct Response {
  int status = 200;
  std::string_view content_type;  // a string literal
  std::array<Header, 4> headers;
  size_t header_count = 0;
  std::string body;

  void Reset();
  void AddHeader(std::string_view name, std::string_view value);
  // The value of header `name`, or null when it is absent.
  const std::string* FindHeader(std::string_view name) const;
};

// A rule as the service serves it: its limit, its RateLimit-Policy value and its counters.
struct ServedRule {
  std::string name;
  Limit limit;
  FailurePolicy on_error = FailurePolicy::kFailOpen;
  std::string policy_header;
  RuleCounters* counters = nullptr;
  size_t max_waiters_per_key = 0;
  size_t max_waiters = 0;
};

// An immutable rule set, looked up by name.
class RuleTable {
 public:
  // Creates (or finds) each rule's counters in `metrics`.
  static std::shared_ptr<const RuleTable> Build(const std::vector<config::Rule>& rules,
                                                Metrics& metrics);

  const ServedRule* Find(std::string_view name) const;
  size_t size() const { return rules_.size(); }
  const std::vector<ServedRule>& all() const { return rules_; }

 private:
  std::vector<ServedRule> rules_;  // sorted by name
};

// The waiting line of one rule for /v1/acquire, and one acquire waiting in it (defined in api.cc).
struct RuleAcquirer;
struct PendingAcquire;

// One request on its way through the Api. The caller owns it (one per connection, reused), keeps
// it alive until on_done runs, and reads the answer from `response`.
class Exchange {
 public:
  // Called once per Handle, when `response` is complete: on the calling thread or on a store
  // thread. Must not block.
  explicit Exchange(std::function<void()> on_done) : on_done_(std::move(on_done)) {}

  Response response;

 private:
  friend class Api;

  struct BatchItem {
    const ServedRule* rule = nullptr;  // null: `error` says why the item was not decided
    std::string error;
    std::string key;  // for TopKeys, should it be denied
  };

  std::function<void()> on_done_;
  std::shared_ptr<const RuleTable> rules_;  // keeps rule_ and batch_ rules alive
  const ServedRule* rule_ = nullptr;
  std::string key_;  // the check's or the acquire's, for TopKeys, should it be denied
  std::chrono::steady_clock::time_point started_;
  std::vector<BatchItem> batch_;
  std::vector<CheckRequest> requests_;
  std::shared_ptr<PendingAcquire> acquire_;  // the last /v1/acquire, for Abandon
};

class Api {
 public:
  // `store` and `metrics` (and `health` and `timers`, when given) must outlive the Api.
  // `health`, the store's when it has one (a ResilientStore), adds the breaker to /readyz.
  // `timers` is where /v1/acquire waits.
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
  void Abandon(Exchange& exchange);

  // The response to a request the HTTP layer refused before it reached Handle (too large,
  // unparsable), counted like any other.
  void Refuse(int status, std::string_view message, Response& response);

  // Answers every /v1/acquire still waiting with "cancelled", including those on the lines of
  // rules a reload has changed since, and answers those that arrive afterwards 503 at once, so
  // that a drain need not wait for their slots. For a drain: it cannot be undone.
  void CancelWaits();

  // Bounds the acquires in progress over every rule (default AcquirerOptions::max_waiters).
  void SetMaxWaiters(size_t max_waiters);

  // Whether GET /v1/top shows the keys denied most (default: no, it answers 403).
  void SetExposeKeys(bool expose) { expose_keys_.store(expose); }

 private:
  void HandleCheck(const Request& request, Exchange& exchange);
  void HandleBatch(const nlohmann::json& checks, std::shared_ptr<const RuleTable> rules,
                   Exchange& exchange);
  void HandleReady(Exchange& exchange);
  void HandleTop(const Request& request, Exchange& exchange);
  // Counts the decision in the metrics and, if it denies, the key in TopKeys.
  void CountDecision(const ServedRule& rule, std::string_view key, const Decision& decision);
  // Returns Handle's answer: true while the acquire waits.
  bool HandleAcquire(const Request& request, Exchange& exchange);
  void OnAcquired(Exchange& exchange, Result<Acquisition> acquired);
  // The rule's current line; null once CancelWaits has run.
  std::shared_ptr<RuleAcquirer> AcquirerFor(const ServedRule& rule);
  // Counts an acquire in progress for `rule`, unless it is over a bound (false).
  bool TakeWaiterPlace(const ServedRule& rule);
  void ReleaseWaiterPlace(const ServedRule& rule);
  // Parses the body as a JSON object into `document`; otherwise answers the error and is false.
  bool ParseBody(const Request& request, Exchange& exchange, nlohmann::json& document);
  void OnDecision(Exchange& exchange, Result<Decision> decision);
  void OnBatch(Exchange& exchange, std::vector<Result<Decision>> results);
  void Fail(Exchange& exchange, int status, std::string_view message);
  // Refuses a check or an acquire the store answered with an error (RefusalOf).
  void Undecided(Exchange& exchange, const Status& error);
  void Finish(Exchange& exchange);
  void StoreAnswered();
  // Notes which path decided: the store answering, or a failure policy standing in for it.
  void Settled(const Decision& decision);
  void StoreFailed(std::string_view why);

  Store& store_;
  const StoreHealth* const health_;
  Metrics& metrics_;
  std::atomic<bool> store_healthy_{true};
  mutable core::Mutex rules_mu_;
  std::shared_ptr<const RuleTable> rules_ GUARDED_BY(rules_mu_);
  Timers* const timers_;
  std::atomic<size_t> max_waiters_;
  std::atomic<size_t> waiters_{0};     // acquires in progress, over every rule
  std::atomic<bool> draining_{false};  // set under acquirers_mu_ by CancelWaits
  core::Mutex acquirers_mu_;
  // By rule name.
  std::unordered_map<std::string, std::shared_ptr<RuleAcquirer>> acquirers_
      GUARDED_BY(acquirers_mu_);
  // Lines replaced by a reload: they live as long as acquires wait on them.
  std::vector<std::weak_ptr<RuleAcquirer>> retired_ GUARDED_BY(acquirers_mu_);
  TopKeys top_keys_{SystemClock::Instance()};
  std::atomic<bool> expose_keys_{false};
};

}  // namespace sluice::http
