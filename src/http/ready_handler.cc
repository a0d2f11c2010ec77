#include "http/ready_handler.h"

#include <fmt/format.h>

#include <iterator>

#include "http/api_json.h"

namespace sluice::http {

bool ReadyHandler::Handle(Call&, Exchange& exchange) {
  store_.ProbeAsync([this, &exchange](Result<Decision> decision) {
    Response& response = exchange.response;
    if (!decision.ok()) {
      answers_.StoreFailed(decision.status().ToString());
      response.status = 503;
      response.body = R"({"error":)";
      AppendJsonString(response.body, "store unavailable: " + decision.status().message());
    } else {
      answers_.StoreAnswered();
      response.body = R"({"status":"ready")";
    }
    if (health_ != nullptr) {
      fmt::format_to(std::back_inserter(response.body), R"(,"breaker":"{}")",
                     BreakerStateName(health_->breaker_state()));
    }
    response.body += '}';
    answers_.Finish(exchange);
  });
  return false;
}

}  // namespace sluice::http
