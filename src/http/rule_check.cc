#include "http/rule_check.h"

#include <utility>

namespace sluice::http {

using Clock = std::chrono::steady_clock;

void RuleCheck::Decide(std::shared_ptr<const RuleTable> rules, const ServedRule& rule,
                       const CheckRequest& request, Exchange& exchange) {
  if (answers_.Admit(exchange, 1) == 0) return;
  State& state = exchange.StateOf<State>();
  state.rules = std::move(rules);
  state.rule = &rule;
  state.key.assign(request.key);
  state.started = Clock::now();
  store_.CheckAsync(request, [this, &exchange](Result<Decision> decision) {
    OnDecision(exchange, std::move(decision));
  });
}

void RuleCheck::OnDecision(Exchange& exchange, Result<Decision> decision) {
  State& state = exchange.StateOf<State>();
  metrics_.ObserveCheckDuration(Clock::now() - state.started);
  // Holds the rule until the answer is complete; the exchange may serve another request then.
  const std::shared_ptr<const RuleTable> rules = std::move(state.rules);
  const ServedRule& rule = *state.rule;
  if (!decision.ok()) return answers_.Undecided(exchange, decision.status());
  answers_.Decided(rule, state.key, *decision);
  AddRateLimitHeaders(rule, *decision, exchange.response);
  answer_(rule, *decision, exchange.response);
  answers_.Finish(exchange);
}

}  // namespace sluice::http
