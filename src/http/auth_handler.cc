#include "http/auth_handler.h"

#include <fmt/format.h>

#include <chrono>

#include "http/api_json.h"

namespace sluice::http {

using Clock = std::chrono::steady_clock;

void AuthHandler::Handle(std::string_view rule_name, const middleware::RequestView* client,
                         std::shared_ptr<const RuleTable> rules, Exchange& exchange) {
  const ServedRule* rule = rules->Find(rule_name);
  if (rule == nullptr) {
    return answers_.Fail(exchange, 404, fmt::format("no rule named '{}'", rule_name));
  }
  if (!rule->auth_key) {
    return answers_.Fail(
        exchange, 404,
        fmt::format("rule '{}' has no key for /v1/auth: give it one (`key:` in the config)",
                    rule_name));
  }
  if (client == nullptr) {
    return answers_.Fail(
        exchange, 401,
        fmt::format("no key for rule '{}': the request shows no peer and no headers", rule_name));
  }
  const auto key = rule->auth_key->Of(*client);
  if (const auto* none = std::get_if<AuthKey::NoKey>(&key)) {
    return answers_.Fail(exchange, none->status,
                         fmt::format("no key for rule '{}': {}", rule_name, none->reason));
  }
  exchange.rules_ = std::move(rules);
  exchange.rule_ = rule;
  exchange.key_.assign(std::get<std::string>(key));
  if (answers_.Admit(exchange, 1) == 0) return;
  exchange.started_ = Clock::now();
  store_.CheckAsync(
      rule->limiter.Request(exchange.key_, 1),
      [this, &exchange](Result<Decision> decision) { OnDecision(exchange, std::move(decision)); });
}

void AuthHandler::OnDecision(Exchange& exchange, Result<Decision> decision) {
  metrics_.ObserveCheckDuration(Clock::now() - exchange.started_);
  const std::shared_ptr<const RuleTable> rules = std::move(exchange.rules_);
  const ServedRule& rule = *exchange.rule_;
  if (!decision.ok()) return answers_.Undecided(exchange, decision.status());
  answers_.Decided(rule, exchange.key_, *decision);
  AddRateLimitHeaders(rule, *decision, exchange.response);
  if (rule.Admits(*decision)) {
    exchange.response.status = 204;
  } else {
    exchange.response.status = rule.deny_status;
    AppendError(exchange.response.body, "rate limit exceeded");
  }
  answers_.Finish(exchange);
}

}  // namespace sluice::http
