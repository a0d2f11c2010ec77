// POST /v1/acquire: {"rule":"api","key":"user:42","cost":1,"max_wait_ms":5000}, answered when
// the request's turn comes, on the rule's line (http/rule_acquirers.h), within max_wait_ms (at
// most kMaxAcquireWait), with its outcome, the wait and the decision (see http/api.h). Answered
// "queue_full" at once beyond the bounds on the acquires in progress, and "cancelled" when the
// service stops (CancelWaits) or the client leaves (Abandon). An acquire of a rule in shadow mode
// does not wait: it is decided as a check and answered admitted at once.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange; Abandon as
// Api::Abandon says.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "http/answers.h"
#include "http/handler.h"
#include "http/metrics.h"
#include "http/rule_acquirers.h"
#include "sluice/acquirer.h"
#include "sluice/clock.h"

namespace sluice::http {

inline constexpr Duration kMaxAcquireWait = std::chrono::minutes(5);

class AcquireHandler final : public Handler {
 public:
  // `timers` is where acquires wait; without them every acquire is answered 501. `metrics`
  // (which shows the acquires in progress while this object lives), `answers` and `timers` must
  // outlive this object.
  AcquireHandler(Metrics& metrics, Answers& answers, Timers* timers);
  ~AcquireHandler() override;
  AcquireHandler(const AcquireHandler&) = delete;
  AcquireHandler& operator=(const AcquireHandler&) = delete;

  // Returns true while the acquire waits for its turn (see Api::Handle).
  bool Handle(Call& call, Exchange& exchange) override;
  void Abandon(Exchange& exchange);
  // Answers every acquire in progress "cancelled", and those that come afterwards 503.
  void CancelWaits();
  void SetMaxWaiters(size_t max_waiters);

 private:
  // A rule in shadow mode admits every acquire, so none waits: it is decided as one check and
  // answered admitted, the would-be verdict in its decision.
  void CheckInShadow(const ServedRule& rule, int64_t cost, Exchange& exchange);
  void OnAcquired(Exchange& exchange, Result<Acquisition> acquired);

  Metrics& metrics_;
  Answers& answers_;
  const std::unique_ptr<RuleAcquirers> lines_;  // null without timers
};

}  // namespace sluice::http
