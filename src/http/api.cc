#include "http/api.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "http/api_json.h"
#include "http/dashboard.h"

namespace sluice::http {

using auth::AuthRefusal;
using auth::Caller;
using auth::CallerTable;

namespace {

using nlohmann::json;

// The scope a path needs; nullopt for those open to all (/healthz, /readyz, the dashboard's
// files, unknown paths).
std::optional<config::Scope> ScopeOf(std::string_view path) {
  if (path == "/v1/check" || path == "/v1/acquire" || path.starts_with(kAuthPathPrefix) ||
      path == "/json") {
    return config::kScopeCheck;
  }
  if (path == "/metrics") return config::kScopeMetrics;
  // The dashboard's files hold no data and a browser's navigation sends no Bearer header: they
  // are open; the page reads /metrics and /v1/top with a token (docs/dashboard.md).
  if (path == "/v1/top" || path.starts_with(kKeysPathPrefix)) return config::kScopeAdmin;
  return std::nullopt;
}

// The operators' endpoints, served on the admin listener when there is one.
bool IsAdminPath(std::string_view path) {
  return path == "/metrics" || path == "/v1/top" || path.starts_with(kKeysPathPrefix) ||
         FindDashboardFile(path) != nullptr;
}

// Whether a listener serving `endpoints` serves `path` (an unknown path is answered 404 anyway).
bool Serves(Endpoints endpoints, std::string_view path) {
  if (endpoints == Endpoints::kAll || path == "/healthz" || path == "/readyz") return true;
  return IsAdminPath(path) == (endpoints == Endpoints::kAdmin);
}

std::string_view ScopeName(config::Scope scope) {
  switch (scope) {
    case config::kScopeCheck:
      return "check";
    case config::kScopeAdmin:
      return "admin";
    case config::kScopeMetrics:
      return "metrics";
  }
  return "?";
}

// The rules a /v1/check or /v1/acquire body names, as their handlers read it (a check's "rule",
// or each of a batch's). A body they cannot read names none here, and they refuse it (400).
std::vector<std::string> RulesNamed(std::string_view body) {
  std::vector<std::string> rules;
  const json document = json::parse(body, nullptr, false);
  const auto add = [&](const json& check) {
    if (!check.is_object()) return;
    if (auto rule = check.find("rule"); rule != check.end() && rule->is_string()) {
      rules.push_back(rule->get<std::string>());
    }
  };
  if (!document.is_object()) return rules;
  add(document);
  if (auto checks = document.find("checks"); checks != document.end() && checks->is_array()) {
    for (const json& check : *checks) add(check);
  }
  return rules;
}

// Every value of a POST /json body's top-level "domain" field, including repeated ones (a
// parser that kept the first would see another domain than one that kept the last); a value
// that is not a string is named "" (no domain a caller may have).
std::vector<std::string> DomainsNamed(std::string_view body) {
  std::vector<std::string> domains;
  bool domain_next = false;
  [[maybe_unused]] const json document = json::parse(
      body,
      [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth == 1 && event == json::parse_event_t::key) {
          domain_next = parsed == "domain";
        } else if (domain_next && depth == 1 && event == json::parse_event_t::value) {
          domains.push_back(parsed.is_string() ? parsed.get<std::string>() : "");
          domain_next = false;
        }
        return true;
      },
      false);
  return domains;
}

}  // namespace

Api::Api(Store& store, Metrics& metrics, std::shared_ptr<const RuleTable> rules,
         const StoreHealth* health, Timers* timers)
    : metrics_(metrics),
      rules_(std::move(rules)),
      checks_(store, metrics, answers_),
      auths_(store, metrics, answers_),
      acquires_(metrics, answers_, timers),
      ready_(store, health, answers_),
      resets_(store, metrics, answers_) {}

void Api::SetRules(std::shared_ptr<const RuleTable> rules) {
  top_keys_.Retain([&](std::string_view rule) { return rules->Find(rule) != nullptr; });
  base::MutexLock lock(rules_mu_);
  rules_.swap(rules);
}

std::shared_ptr<const RuleTable> Api::rules() const {
  base::MutexLock lock(rules_mu_);
  return rules_;
}

void Api::SetCallers(std::shared_ptr<const CallerTable> callers) {
  base::MutexLock lock(rules_mu_);
  callers_.swap(callers);
}

void Api::RefuseCaller(AuthRefusal refusal, std::string_view message, Exchange& exchange) {
  auth_refusals_.Count(refusal);
  int status = 403;
  if (refusal == AuthRefusal::kMissing || refusal == AuthRefusal::kUnknown) {
    status = 401;
    exchange.response.AddHeader("WWW-Authenticate", "Bearer");
  } else if (refusal == AuthRefusal::kThrottled) {
    status = 429;
    exchange.response.AddHeader("Retry-After", "1");
  }
  answers_.Fail(exchange, status, message);
}

bool Api::Authorize(const Request& request, std::string_view path, Exchange& exchange,
                    std::string* who) {
  std::shared_ptr<const CallerTable> callers;
  {
    base::MutexLock lock(rules_mu_);
    callers = callers_;
  }
  const std::string_view peer = request.client ? request.client->peer_address() : "";
  if (who) *who = fmt::format("an unauthenticated caller at {}", peer);
  if (!callers || !callers->enabled()) return true;
  const std::optional<config::Scope> scope = ScopeOf(path);
  if (!scope) return true;

  if (auth_failures_.Throttled(peer)) {
    RefuseCaller(AuthRefusal::kThrottled, "too many failed authentications; retry later", exchange);
    return false;
  }
  const auto authentication =
      callers->Identify(request.client ? request.client->header("Authorization") : std::nullopt,
                        request.certificate_names);
  if (authentication.caller == nullptr) {
    auth_failures_.Count(peer);
    RefuseCaller(authentication.refusal,
                 authentication.refusal == AuthRefusal::kMissing
                     ? "this path needs Authorization: Bearer <token> or a caller's client "
                       "certificate"
                     : "the credential presented is no caller's",
                 exchange);
    return false;
  }
  const Caller& caller = *authentication.caller;
  if (who) *who = fmt::format("caller '{}' at {}", caller.name, peer);
  if (!CallerTable::Allows(caller, *scope)) {
    RefuseCaller(
        AuthRefusal::kScope,
        fmt::format("caller '{}' may not use {} (scope {})", caller.name, path, ScopeName(*scope)),
        exchange);
    return false;
  }
  if (*scope == config::kScopeAdmin && caller.rules && path.starts_with(kKeysPathPrefix)) {
    // A caller given rules resets keys of those only.
    const std::string_view rest = path.substr(kKeysPathPrefix.size());
    if (!CallerTable::AllowsRule(caller, rest.substr(0, rest.find('/')))) {
      RefuseCaller(AuthRefusal::kRule,
                   fmt::format("caller '{}' may not use this rule", caller.name), exchange);
      return false;
    }
    return true;
  }
  if (*scope != config::kScopeCheck || (!caller.rules && !caller.domains)) return true;
  if (path == "/json") {
    if (!caller.domains) return true;
    for (const std::string& domain : DomainsNamed(request.body)) {
      if (!CallerTable::AllowsDomain(caller, domain)) {
        RefuseCaller(AuthRefusal::kRule,
                     fmt::format("caller '{}' may not use this domain", caller.name), exchange);
        return false;
      }
    }
    return true;
  }
  if (!caller.rules) return true;
  const std::vector<std::string> named =
      path.starts_with(kAuthPathPrefix)
          ? std::vector<std::string>{std::string(path.substr(kAuthPathPrefix.size()))}
          : RulesNamed(request.body);
  for (const std::string& rule : named) {
    if (!CallerTable::AllowsRule(caller, rule)) {
      RefuseCaller(AuthRefusal::kRule,
                   fmt::format("caller '{}' may not use this rule", caller.name), exchange);
      return false;
    }
  }
  return true;
}

bool Api::Handle(const Request& request, Exchange& exchange) {
  exchange.Start(request.caller);
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  if (!Serves(request.endpoints, path)) {
    NotFound(request.endpoints, exchange);
    return false;
  }
  // Who changes state, for its log line; only a reset does.
  std::string who;
  const bool resets = path.starts_with(kKeysPathPrefix);
  if (!Authorize(request, path, exchange, resets ? &who : nullptr)) return false;
  const auto [handler, method] = Route(path);
  if (handler == nullptr) {
    NotFound(request.endpoints, exchange);
    return false;
  }
  if (!method.empty() && request.method != method) {
    exchange.response.AddHeader("Allow", method);
    answers_.Fail(exchange, 405, fmt::format("{} allows {} only", path, method));
    return false;
  }
  Call call{request, path, rules(), who};
  return handler->Handle(call, exchange);
}

Api::Routed Api::Route(std::string_view path) {
  if (path == "/v1/check") return {&checks_, "POST"};
  if (path == "/v1/acquire") return {&acquires_, "POST"};
  if (path.starts_with(kAuthPathPrefix)) return {&auths_, ""};
  if (path == "/healthz") return {&health_, "GET"};
  if (path == "/readyz") return {&ready_, "GET"};
  if (path == "/v1/top") return {&top_, "GET"};
  if (path.starts_with(kKeysPathPrefix)) return {&resets_, "DELETE"};
  if (path == "/metrics") return {&metrics_handler_, "GET"};
  if (FindDashboardFile(path) != nullptr) return {&dashboard_, "GET"};
  if (path == "/json" && json_route_) return {&*json_route_, "POST"};
  return {nullptr, ""};
}

void Api::NotFound(Endpoints endpoints, Exchange& exchange) {
  std::string_view message;
  switch (endpoints) {
    case Endpoints::kAll:
      message =
          "no such path; try POST /v1/check, /v1/acquire, any /v1/auth/{rule}, GET /healthz, "
          "/readyz, /metrics, /v1/top, / (the dashboard) or DELETE /v1/keys/{rule}/{key}";
      break;
    case Endpoints::kDecisions:
      message =
          "no such path; try POST /v1/check, /v1/acquire, any /v1/auth/{rule}, GET /healthz or "
          "/readyz";
      break;
    case Endpoints::kAdmin:
      message =
          "no such path; try GET /healthz, /readyz, /metrics, /v1/top, / (the dashboard) or "
          "DELETE /v1/keys/{rule}/{key}";
      break;
  }
  answers_.Fail(exchange, 404, message);
}

}  // namespace sluice::http
