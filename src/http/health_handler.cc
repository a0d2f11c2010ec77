#include "http/health_handler.h"

namespace sluice::http {

bool HealthHandler::Handle(Call&, Exchange& exchange) {
  exchange.response.body = R"({"status":"ok"})";
  answers_.Finish(exchange);
  return false;
}

}  // namespace sluice::http
