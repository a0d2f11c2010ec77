#include "http/api_json.h"

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "config/duration.h"
#include "json/client_json.h"

namespace sluice::http {

using nlohmann::json;

void AppendJsonString(std::string& out, std::string_view text) {
  out += json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

void AppendError(std::string& out, std::string_view message) {
  out += R"({"error":)";
  AppendJsonString(out, message);
  out += '}';
}

void AppendDecision(std::string& out, const ServedRule& rule, const Decision& d) {
  fmt::format_to(std::back_inserter(out),
                 R"({{"allowed":{},"limit":{},"remaining":{},"retry_after_ms":{},)"
                 R"("reset_after_ms":{},"source":"{}","degraded":{})",
                 rule.Admits(d), d.limit, d.remaining, config::CeilMillis(d.retry_after),
                 config::CeilMillis(d.reset_after), DecisionSourceName(d.source), d.degraded());
  if (rule.shadow_mode)
    fmt::format_to(std::back_inserter(out), R"(,"shadow":true,"would_allow":{})", d.allowed);
  out += '}';
}

bool ReadBody(const Request& request, Exchange& exchange, Answers& answers, json& document) {
  if (request.body.size() > kMaxBodyBytes) {
    answers.Fail(exchange, 413,
                 fmt::format("request body is above the maximum of {} bytes", kMaxBodyBytes));
    return false;
  }
  auto read = sluice::json::ReadClientJson(request.body);
  if (!read.ok()) {
    answers.Fail(exchange, 400, read.status().message());
    return false;
  }
  document = std::move(*read);
  if (!document.is_object()) {
    answers.Fail(exchange, 400, "the body must be a JSON object");
    return false;
  }
  return true;
}

Result<ParsedCheck> ParseCheck(const json& item, const RuleTable& rules) {
  if (!item.is_object()) return Status::InvalidArgument("a check must be a JSON object");
  const json* rule_name = nullptr;
  const json* key = nullptr;
  const json* cost = nullptr;
  for (const auto& [field, value] : item.items()) {
    if (field == "rule") {
      rule_name = &value;
    } else if (field == "key") {
      key = &value;
    } else if (field == "cost") {
      cost = &value;
    } else {
      return Status::InvalidArgument("unknown field '" + field + "' (expected rule, key, cost)");
    }
  }
  if (rule_name == nullptr) return Status::InvalidArgument("missing field 'rule'");
  if (!rule_name->is_string()) return Status::InvalidArgument("'rule' must be a string");
  if (key == nullptr) return Status::InvalidArgument("missing field 'key'");
  if (!key->is_string()) return Status::InvalidArgument("'key' must be a string");

  int64_t units = 1;
  if (cost != nullptr) {
    if (!cost->is_number_unsigned() ||
        cost->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument("'cost' must be a non-negative integer");
    }
    units = static_cast<int64_t>(cost->get<uint64_t>());
  }

  const auto& name = rule_name->get_ref<const std::string&>();
  const ServedRule* rule = rules.Find(name);
  if (rule == nullptr) return Status::InvalidArgument("unknown rule '" + name + "'");
  const CheckRequest request = rule->limiter.Request(key->get_ref<const std::string&>(), units);
  if (Status s = ValidateCheck(request); !s.ok()) return s;
  return ParsedCheck{rule, request};
}

}  // namespace sluice::http
