#include "http/dashboard_handler.h"

#include "http/dashboard.h"

namespace sluice::http {

bool DashboardHandler::Handle(Call& call, Exchange& exchange) {
  ServeDashboardFile(*FindDashboardFile(call.path), exchange.response);
  answers_.Finish(exchange);
  return false;
}

}  // namespace sluice::http
