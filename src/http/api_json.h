// The JSON of the Api: reading a request's body and its check objects, {"rule":..., "key":...,
// "cost":...}, and writing an error, {"error":"..."}, and a rule's decision (the one place a
// Decision is written as JSON):
//   {"allowed":true,"limit":100,"remaining":99,"retry_after_ms":0,"reset_after_ms":600,
//    "source":"store","degraded":false}
// with durations in whole milliseconds rounded up (config::CeilMillis). A rule in shadow mode
// answers "allowed":true, the rest as decided, and adds "shadow":true,"would_allow":<verdict>.
//
// Thread safety: pure functions, apart from ReadBody answering through `answers`.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "http/answers.h"
#include "http/exchange.h"
#include "http/rule_table.h"
#include "sluice/decision.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice::http {

void AppendJsonString(std::string& out, std::string_view text);
void AppendError(std::string& out, std::string_view message);
void AppendDecision(std::string& out, const ServedRule& rule, const Decision& decision);

// Reads the request's body, a JSON object, into `document`; otherwise answers the error (413 for
// a body above kMaxBodyBytes, 400 for anything but one JSON object, or for a key twice in an
// object: json/client_json.h) and returns false.
bool ReadBody(const Request& request, Exchange& exchange, Answers& answers,
              nlohmann::json& document);

struct ParsedCheck {
  const ServedRule* rule;
  CheckRequest request;  // built by the rule's Limiter
};

// One check object looked up in `rules`, its request built by the rule's Limiter and validated.
// INVALID_ARGUMENT (or COST_EXCEEDS_LIMIT) saying what is wrong otherwise. The request's views
// point into `item` and the rule table.
Result<ParsedCheck> ParseCheck(const nlohmann::json& item, const RuleTable& rules);

}  // namespace sluice::http
