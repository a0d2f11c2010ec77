#include "http/api.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "http/api_json.h"
#include "http/dashboard.h"

namespace sluice::http {

Api::Api(Store& store, Metrics& metrics, std::shared_ptr<const RuleTable> rules,
         const StoreHealth* health, Timers* timers)
    : metrics_(metrics),
      rules_(std::move(rules)),
      checks_(store, metrics, answers_),
      auths_(store, metrics, answers_),
      acquires_(metrics, answers_, timers),
      ready_(store, health, answers_) {}

void Api::SetRules(std::shared_ptr<const RuleTable> rules) {
  top_keys_.Retain([&](std::string_view rule) { return rules->Find(rule) != nullptr; });
  core::MutexLock lock(rules_mu_);
  rules_.swap(rules);
}

std::shared_ptr<const RuleTable> Api::rules() const {
  core::MutexLock lock(rules_mu_);
  return rules_;
}

bool Api::Handle(const Request& request, Exchange& exchange) {
  exchange.response.Reset();
  exchange.acquire_.reset();
  exchange.caller_ = request.caller;
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  const auto route = [&](std::string_view method) {
    if (request.method == method) return true;
    exchange.response.AddHeader("Allow", method);
    answers_.Fail(exchange, 405, fmt::format("{} allows {} only", path, method));
    return false;
  };

  if (path == "/v1/acquire") return route("POST") && acquires_.Handle(request, rules(), exchange);
  if (path == "/v1/check") {
    nlohmann::json document;
    if (route("POST") && ReadBody(request, exchange, answers_, document)) {
      checks_.Handle(document, rules(), exchange);
    }
  } else if (path.starts_with(kAuthPathPrefix)) {
    auths_.Handle(path.substr(kAuthPathPrefix.size()), request.client, rules(), exchange);
  } else if (path == "/healthz") {
    if (route("GET")) {
      exchange.response.body = R"({"status":"ok"})";
      answers_.Finish(exchange);
    }
  } else if (path == "/readyz") {
    if (route("GET")) ready_.Handle(exchange);
  } else if (path == "/metrics") {
    if (route("GET")) {
      exchange.response.content_type = "text/plain; version=0.0.4; charset=utf-8";
      exchange.response.body = metrics_.Exposition();
      if (json_route_metrics_) exchange.response.body += json_route_metrics_();
      answers_.Finish(exchange);
    }
  } else if (path == "/json" && json_route_) {
    if (route("POST")) {
      json_route_(request.body, request.caller, [this, &exchange](int status, std::string body) {
        exchange.response.status = status;
        exchange.response.body = std::move(body);
        answers_.Finish(exchange);
      });
    }
  } else if (path == "/v1/top") {
    if (route("GET")) top_.Handle(request, *rules(), exchange);
  } else if (const DashboardFile* file = FindDashboardFile(path)) {
    if (route("GET")) {
      ServeDashboardFile(*file, exchange.response);
      answers_.Finish(exchange);
    }
  } else {
    answers_.Fail(exchange, 404,
                  "no such path; try POST /v1/check, /v1/acquire, any /v1/auth/{rule}, GET "
                  "/healthz, /readyz, /metrics, /v1/top or / (the dashboard)");
  }
  return false;
}

}  // namespace sluice::http
