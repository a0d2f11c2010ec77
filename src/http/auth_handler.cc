#include "http/auth_handler.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

#include "http/api_json.h"

namespace sluice::http {
namespace {

void AnswerStatus(const ServedRule& rule, const Decision& decision, Response& response) {
  if (rule.Admits(decision)) {
    response.status = 204;
  } else {
    response.status = rule.deny_status;
    AppendError(response.body, "rate limit exceeded");
  }
}

}  // namespace

AuthHandler::AuthHandler(Store& store, Metrics& metrics, Answers& answers)
    : answers_(answers), check_(store, metrics, answers, AnswerStatus) {}

bool AuthHandler::Handle(Call& call, Exchange& exchange) {
  const std::string_view rule_name = call.path.substr(kAuthPathPrefix.size());
  const ServedRule* rule = call.rules->Find(rule_name);
  if (rule == nullptr) {
    answers_.Fail(exchange, 404, fmt::format("no rule named '{}'", rule_name));
    return false;
  }
  if (!rule->auth_key) {
    answers_.Fail(
        exchange, 404,
        fmt::format("rule '{}' has no key for /v1/auth: give it one (`key:` in the config)",
                    rule_name));
    return false;
  }
  if (call.request.client == nullptr) {
    answers_.Fail(
        exchange, 401,
        fmt::format("no key for rule '{}': the request shows no peer and no headers", rule_name));
    return false;
  }
  const auto key = rule->auth_key->Of(*call.request.client);
  if (const auto* none = std::get_if<AuthKey::NoKey>(&key)) {
    answers_.Fail(exchange, none->status,
                  fmt::format("no key for rule '{}': {}", rule_name, none->reason));
    return false;
  }
  check_.Decide(std::move(call.rules), *rule, rule->limiter.Request(std::get<std::string>(key), 1),
                exchange);
  return false;
}

}  // namespace sluice::http
