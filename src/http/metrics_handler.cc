#include "http/metrics_handler.h"

namespace sluice::http {

bool MetricsHandler::Handle(Call&, Exchange& exchange) {
  Response& response = exchange.response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = metrics_.Exposition();
  if (front_end_) response.body += front_end_();
  response.body += refusals_.Exposition("sluice_auth_refused_total",
                                        "Requests refused before any handler, by reason.");
  answers_.Finish(exchange);
  return false;
}

}  // namespace sluice::http
