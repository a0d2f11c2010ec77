#include "http/top_handler.h"

#include "http/top_keys_json.h"

namespace sluice::http {

bool TopHandler::Handle(Call& call, Exchange& exchange) {
  Answer(call.request.target, *call.rules, exchange);
  return false;
}

void TopHandler::Answer(std::string_view target, const RuleTable& rules, Exchange& exchange) {
  if (!expose_keys_.load()) {
    return answers_.Fail(exchange, 403,
                         "keys are hidden: set server.expose_keys: true to show them");
  }
  const size_t query_at = target.find('?');
  auto query = ParseTopQuery(query_at == std::string_view::npos ? "" : target.substr(query_at + 1),
                             top_keys_.options().counters_per_rule);
  if (!query.ok()) return answers_.Fail(exchange, 400, query.status().message());
  std::string& body = exchange.response.body;
  if (query->rule) {
    const ServedRule* rule = rules.Find(*query->rule);
    if (rule == nullptr) return answers_.Fail(exchange, 404, "no rule '" + *query->rule + "'");
    AppendTopJson(body, rule->name(), top_keys_.Top(rule->name(), query->n));
  } else {
    body += R"({"rules":[)";
    for (const ServedRule& rule : rules.all()) {
      if (&rule != &rules.all().front()) body += ',';
      AppendTopJson(body, rule.name(), top_keys_.Top(rule.name(), query->n));
    }
    body += "]}";
  }
  exchange.response.AddHeader("Cache-Control", "no-store");
  answers_.Finish(exchange);
}

}  // namespace sluice::http
