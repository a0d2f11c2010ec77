#include "http/acquire_handler.h"

#include <fmt/format.h>

#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "base/mutex.h"
#include "config/duration.h"
#include "http/api_json.h"
#include "middleware/rate_limit_headers.h"

namespace sluice::http {

using nlohmann::json;

namespace {

// One acquire in progress, shared by its state (for Abandon) and its callback.
struct PendingAcquire {
  explicit PendingAcquire(std::shared_ptr<RuleAcquirer> on) : line(std::move(on)) {}

  base::Mutex mu;
  // Keeps the line alive; null once the acquire has ended.
  std::shared_ptr<RuleAcquirer> line SLUICE_GUARDED_BY(mu);
  AcquireId id SLUICE_GUARDED_BY(mu) = 0;  // set when AcquireAsync returns
};

// What an acquire keeps until its answer.
struct AcquireState {
  std::shared_ptr<const RuleTable> rules;
  const ServedRule* rule = nullptr;
  std::string key;                          // for TopKeys, should it be denied
  std::shared_ptr<PendingAcquire> pending;  // while it waits on its line
};

}  // namespace

AcquireHandler::AcquireHandler(Metrics& metrics, Answers& answers, Timers* timers)
    : metrics_(metrics),
      answers_(answers),
      lines_(timers ? std::make_unique<RuleAcquirers>(*timers) : nullptr) {
  if (lines_) metrics_.Watch(*lines_);
}

AcquireHandler::~AcquireHandler() {
  if (lines_) metrics_.StopWatching(*lines_);
}

bool AcquireHandler::Handle(Call& call, Exchange& exchange) {
  AcquireState& state = exchange.StateOf<AcquireState>();
  state.pending.reset();
  if (lines_ == nullptr) {
    answers_.Fail(exchange, 501, "this service does not wait for slots");
    return false;
  }
  json document;
  if (!ReadBody(call.request, exchange, answers_, document)) return false;
  const auto wait = document.find("max_wait_ms");
  const uint64_t most_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(kMaxAcquireWait).count();
  if (wait == document.end()) {
    answers_.Fail(exchange, 400, "missing field 'max_wait_ms'");
    return false;
  }
  if (!wait->is_number_unsigned() || wait->get<uint64_t>() > most_ms) {
    answers_.Fail(exchange, 400,
                  fmt::format("'max_wait_ms' must be an integer between 0 and {}", most_ms));
    return false;
  }
  const Duration max_wait = std::chrono::milliseconds(wait->get<uint64_t>());
  document.erase(wait);
  auto check = ParseCheck(document, *call.rules);
  if (!check.ok()) {
    answers_.Fail(exchange, 400, check.status().message());
    return false;
  }
  // Admitted as one check: a waiting acquire holds no store work, its line sends its checks one
  // at a time, and the line's waiters are bounded (max_waiters).
  if (answers_.Admit(exchange, 1) == 0) return false;
  const ServedRule& rule = *check->rule;
  state.rules = std::move(call.rules);
  state.rule = &rule;
  state.key.assign(check->request.key);
  if (rule.shadow_mode) {
    CheckInShadow(rule, check->request.cost, exchange);
    return false;
  }
  const std::shared_ptr<RuleAcquirer> line = lines_->For(rule);
  if (line == nullptr) {
    state.rules.reset();
    answers_.Fail(exchange, 503, "the service is stopping and takes no new acquires");
    return false;
  }
  if (!lines_->TakePlace(*line)) {
    Acquisition refused;
    refused.outcome = AcquireOutcome::kQueueFull;
    OnAcquired(exchange, std::move(refused));
    return false;
  }
  auto pending = std::make_shared<PendingAcquire>(line);
  state.pending = pending;
  exchange.admitted.ticket.Release();  // see Admit above: the line paces what follows
  const AcquireId id = line->acquirer.AcquireAsync(
      check->request.key, check->request.cost, max_wait,
      [this, &exchange, pending](Result<Acquisition> acquired) {
        std::shared_ptr<RuleAcquirer> ended;  // released after the answer, as it may be the last
        {
          base::MutexLock lock(pending->mu);
          ended = std::move(pending->line);
        }
        lines_->ReleasePlace(*ended);
        OnAcquired(exchange, std::move(acquired));
      });
  const auto still_waits = [&] {
    base::MutexLock lock(pending->mu);
    pending->id = id;
    return pending->line != nullptr;
  };
  // A CancelWaits since For either cancelled this acquire or is seen here.
  if (still_waits() && lines_->cancelled()) line->acquirer.Cancel(id);
  return still_waits();
}

void AcquireHandler::CheckInShadow(const ServedRule& rule, int64_t cost, Exchange& exchange) {
  rule.limiter.CheckAsync(
      exchange.StateOf<AcquireState>().key, cost, [this, &exchange](Result<Decision> decision) {
        if (!decision.ok()) return OnAcquired(exchange, decision.status());
        OnAcquired(exchange,
                   Acquisition{.outcome = AcquireOutcome::kAdmitted, .decision = *decision});
      });
}

void AcquireHandler::OnAcquired(Exchange& exchange, Result<Acquisition> acquired) {
  AcquireState& state = exchange.StateOf<AcquireState>();
  // Holds the rule until the answer is complete; the exchange may serve another request then.
  const std::shared_ptr<const RuleTable> rules = std::move(state.rules);
  const ServedRule& rule = *state.rule;
  if (!acquired.ok()) return answers_.Undecided(exchange, acquired.status());
  metrics_.CountAcquire(*rule.counters, acquired->outcome);
  Response& response = exchange.response;
  fmt::format_to(std::back_inserter(response.body), R"({{"outcome":"{}","waited_ms":{})",
                 AcquireOutcomeName(acquired->outcome), config::CeilMillis(acquired->waited));
  // A decision's limit is the rule's count, never 0: 0 means no check was made (queue_full, or
  // cancelled in line).
  const Decision& decision = acquired->decision;
  if (decision.limit > 0) {
    answers_.Decided(rule, state.key, decision);
    response.body += R"(,"decision":)";
    AppendDecision(response.body, rule, decision);
    AddRateLimitHeaders(rule, decision, response);
  }
  response.body += '}';
  response.AddHeader("Server-Timing", middleware::ServerTimingValue(acquired->waited));
  answers_.Finish(exchange);
}

void AcquireHandler::Abandon(Exchange& exchange) {
  const AcquireState* state = exchange.FindState<AcquireState>();
  if (state == nullptr || state->pending == nullptr) return;
  const std::shared_ptr<PendingAcquire> pending = state->pending;
  std::shared_ptr<RuleAcquirer> line;
  AcquireId id = 0;
  {
    base::MutexLock lock(pending->mu);
    line = pending->line;
    id = pending->id;
  }
  // Outside the lock: the cancelled acquire's callback takes it.
  if (line != nullptr) line->acquirer.Cancel(id);
}

void AcquireHandler::CancelWaits() {
  if (lines_) lines_->CancelAll();
}

void AcquireHandler::SetMaxWaiters(size_t max_waiters) {
  if (lines_) lines_->SetMaxWaiters(max_waiters);
}

}  // namespace sluice::http
