#include "http/json_route_handler.h"

namespace sluice::http {

bool JsonRouteHandler::Handle(Call& call, Exchange& exchange) {
  route_(call.request.body, call.request.caller, [this, &exchange](int status, std::string body) {
    exchange.response.status = status;
    exchange.response.body = std::move(body);
    answers_.Finish(exchange);
  });
  return false;
}

}  // namespace sluice::http
