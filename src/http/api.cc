#include "http/api.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "http/dashboard.h"
#include "http/top_keys_json.h"
#include "middleware/rate_limit_headers.h"
#include "middleware/refusal.h"

namespace sluice::http {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";

int64_t CeilMillis(Duration d) { return d.count() <= 0 ? 0 : (d.count() + 999) / 1000; }

void AppendJsonString(std::string& out, std::string_view text) {
  out += json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

void AppendDecision(std::string& out, const Decision& d) {
  fmt::format_to(std::back_inserter(out),
                 R"({{"allowed":{},"limit":{},"remaining":{},"retry_after_ms":{},)"
                 R"("reset_after_ms":{},"source":"{}","degraded":{}}})",
                 d.allowed, d.limit, d.remaining, CeilMillis(d.retry_after),
                 CeilMillis(d.reset_after), DecisionSourceName(d.source), d.degraded());
}

void AppendError(std::string& out, std::string_view message) {
  out += R"({"error":)";
  AppendJsonString(out, message);
  out += '}';
}

struct ParsedCheck {
  const ServedRule* rule;
  CheckRequest request;
};

// One check object, {"rule":..., "key":..., "cost":...}, looked up and validated. The request's
// views point into `item` and the rule table.
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
  const CheckRequest request{.scope = rule->name,
                             .limit = &rule->limit,
                             .key = key->get_ref<const std::string&>(),
                             .cost = units,
                             .on_error = rule->on_error};
  if (Status s = ValidateCheck(request); !s.ok()) return s;
  return ParsedCheck{rule, request};
}

AcquirerOptions AcquirerOptionsOf(const ServedRule& rule) {
  return {.max_waiters_per_key = rule.max_waiters_per_key, .max_waiters = rule.max_waiters};
}

// Adds one to `count` unless it has reached `bound`.
bool TakePlace(std::atomic<size_t>& count, size_t bound) {
  size_t n = count.load();
  do {
    if (n >= bound) return false;
  } while (!count.compare_exchange_weak(n, n + 1));
  return true;
}

}  // namespace

// One rule's Acquirer, with the rule it was built for: a reload that changes the rule gets a
// new one, and the acquires waiting on the old one finish there.
struct RuleAcquirer {
  RuleAcquirer(Store& store, const ServedRule& rule, Timers& timers)
      : limit(rule.limit),
        on_error(rule.on_error),
        options(AcquirerOptionsOf(rule)),
        limiter(store, rule.name, rule.limit, rule.on_error),
        acquirer(limiter, timers, options) {}

  bool Serves(const ServedRule& rule) const {
    const AcquirerOptions wanted = AcquirerOptionsOf(rule);
    return limit == rule.limit && on_error == rule.on_error &&
           options.max_waiters_per_key == wanted.max_waiters_per_key &&
           options.max_waiters == wanted.max_waiters;
  }

  const Limit limit;
  const FailurePolicy on_error;
  const AcquirerOptions options;
  Limiter limiter;
  Acquirer acquirer;
};

// One acquire in progress, shared by its Exchange (for Abandon) and its callback.
struct PendingAcquire {
  explicit PendingAcquire(std::shared_ptr<RuleAcquirer> on) : line(std::move(on)) {}

  core::Mutex mu;
  // Keeps the line alive; null once the acquire has ended.
  std::shared_ptr<RuleAcquirer> line GUARDED_BY(mu);
  AcquireId id GUARDED_BY(mu) = 0;  // set when AcquireAsync returns
};

void Response::Reset() {
  status = 200;
  content_type = kJson;
  header_count = 0;
  body.clear();
}

void Response::AddHeader(std::string_view name, std::string_view value) {
  assert(header_count < headers.size());
  Header& h = headers[header_count++];
  h.name = name;
  h.value.assign(value);
}

const std::string* Response::FindHeader(std::string_view name) const {
  for (size_t i = 0; i < header_count; ++i) {
    if (headers[i].name == name) return &headers[i].value;
  }
  return nullptr;
}

std::shared_ptr<const RuleTable> RuleTable::Build(const std::vector<config::Rule>& rules,
                                                  Metrics& metrics) {
  auto table = std::make_shared<RuleTable>();
  table->rules_.reserve(rules.size());
  for (const config::Rule& rule : rules) {
    table->rules_.push_back(
        ServedRule{.name = rule.name,
                   .limit = rule.limit,
                   .on_error = rule.on_error,
                   .policy_header = middleware::RateLimitPolicyValue(rule.name, rule.limit),
                   .counters = &metrics.ForRule(rule.name),
                   .max_waiters_per_key = rule.max_waiters_per_key,
                   .max_waiters = rule.max_waiters});
  }
  std::sort(table->rules_.begin(), table->rules_.end(),
            [](const ServedRule& a, const ServedRule& b) { return a.name < b.name; });
  return table;
}

const ServedRule* RuleTable::Find(std::string_view name) const {
  auto it = std::lower_bound(rules_.begin(), rules_.end(), name,
                             [](const ServedRule& r, std::string_view n) { return r.name < n; });
  return it != rules_.end() && it->name == name ? &*it : nullptr;
}

Api::Api(Store& store, Metrics& metrics, std::shared_ptr<const RuleTable> rules,
         const StoreHealth* health, Timers* timers)
    : store_(store),
      health_(health),
      metrics_(metrics),
      rules_(std::move(rules)),
      timers_(timers),
      max_waiters_(AcquirerOptions{}.max_waiters) {}

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
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  const auto route = [&](std::string_view method) {
    if (request.method == method) return true;
    exchange.response.AddHeader("Allow", method);
    Fail(exchange, 405, fmt::format("{} allows {} only", path, method));
    return false;
  };

  if (path == "/v1/acquire") return route("POST") && HandleAcquire(request, exchange);
  if (path == "/v1/check") {
    if (route("POST")) HandleCheck(request, exchange);
  } else if (path == "/healthz") {
    if (route("GET")) {
      exchange.response.body = R"({"status":"ok"})";
      Finish(exchange);
    }
  } else if (path == "/readyz") {
    if (route("GET")) HandleReady(exchange);
  } else if (path == "/metrics") {
    if (route("GET")) {
      exchange.response.content_type = kPrometheusText;
      exchange.response.body = metrics_.Exposition();
      Finish(exchange);
    }
  } else if (path == "/v1/top") {
    if (route("GET")) HandleTop(request, exchange);
  } else if (const DashboardFile* file = FindDashboardFile(path)) {
    if (route("GET")) {
      ServeDashboardFile(*file, exchange.response);
      Finish(exchange);
    }
  } else {
    Fail(exchange, 404,
         "no such path; try POST /v1/check, /v1/acquire, GET /healthz, /readyz, /metrics, "
         "/v1/top or / (the dashboard)");
  }
  return false;
}

bool Api::ParseBody(const Request& request, Exchange& exchange, json& document) {
  if (request.body.size() > kMaxBodyBytes) {
    Fail(exchange, 413,
         fmt::format("request body is above the maximum of {} bytes", kMaxBodyBytes));
    return false;
  }
  try {
    document = json::parse(request.body);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    Fail(exchange, 400, fmt::format("malformed JSON: {}", e.what()));
    return false;
  }
  if (!document.is_object()) {
    Fail(exchange, 400, "the body must be a JSON object");
    return false;
  }
  return true;
}

void Api::HandleCheck(const Request& request, Exchange& exchange) {
  json document;
  if (!ParseBody(request, exchange, document)) return;

  std::shared_ptr<const RuleTable> rules = this->rules();
  if (auto checks = document.find("checks"); checks != document.end()) {
    if (document.size() != 1) {
      return Fail(exchange, 400, "a batch has one field, 'checks'");
    }
    return HandleBatch(*checks, std::move(rules), exchange);
  }

  auto check = ParseCheck(document, *rules);
  if (!check.ok()) return Fail(exchange, 400, check.status().message());
  exchange.rules_ = std::move(rules);
  exchange.rule_ = check->rule;
  exchange.key_.assign(check->request.key);
  exchange.started_ = Clock::now();
  store_.CheckAsync(check->request, [this, &exchange](Result<Decision> decision) {
    OnDecision(exchange, std::move(decision));
  });
}

void Api::OnDecision(Exchange& exchange, Result<Decision> decision) {
  metrics_.ObserveCheckDuration(Clock::now() - exchange.started_);
  const std::shared_ptr<const RuleTable> rules = std::move(exchange.rules_);
  const ServedRule& rule = *exchange.rule_;
  if (!decision.ok()) return Undecided(exchange, decision.status());
  Settled(*decision);
  CountDecision(rule, exchange.key_, *decision);

  Response& response = exchange.response;
  AppendDecision(response.body, *decision);
  response.AddHeader("RateLimit-Policy", rule.policy_header);
  response.AddHeader("RateLimit", middleware::RateLimitValue(rule.name, *decision));
  if (!decision->allowed) response.AddHeader("Retry-After", middleware::RetryAfterValue(*decision));
  Finish(exchange);
}

void Api::HandleBatch(const json& checks, std::shared_ptr<const RuleTable> rules,
                      Exchange& exchange) {
  if (!checks.is_array()) return Fail(exchange, 400, "'checks' must be an array");
  if (checks.size() > kMaxBatchChecks) {
    return Fail(
        exchange, 400,
        fmt::format("a batch holds at most {} checks, got {}", kMaxBatchChecks, checks.size()));
  }
  exchange.batch_.resize(checks.size());
  exchange.requests_.clear();
  for (size_t i = 0; i < checks.size(); ++i) {
    auto check = ParseCheck(checks[i], *rules);
    Exchange::BatchItem& item = exchange.batch_[i];
    if (check.ok()) {
      item.rule = check->rule;
      item.key.assign(check->request.key);
      exchange.requests_.push_back(check->request);
    } else {
      item.rule = nullptr;
      item.error = check.status().message();
    }
  }
  exchange.rules_ = std::move(rules);
  if (exchange.requests_.empty()) return OnBatch(exchange, {});
  exchange.started_ = Clock::now();
  store_.CheckBatchAsync(exchange.requests_,
                         [this, &exchange](std::vector<Result<Decision>> results) {
                           metrics_.ObserveCheckDuration(Clock::now() - exchange.started_);
                           OnBatch(exchange, std::move(results));
                         });
}

void Api::OnBatch(Exchange& exchange, std::vector<Result<Decision>> results) {
  const std::shared_ptr<const RuleTable> rules = std::move(exchange.rules_);
  std::string& body = exchange.response.body;
  body += R"({"results":[)";
  size_t next = 0;
  for (size_t i = 0; i < exchange.batch_.size(); ++i) {
    if (i > 0) body += ',';
    const Exchange::BatchItem& item = exchange.batch_[i];
    if (item.rule == nullptr) {
      AppendError(body, item.error);
      continue;
    }
    assert(next < results.size());
    const Result<Decision>& result = results[next++];
    if (!result.ok()) {
      StoreFailed(result.status().ToString());
      AppendError(body, result.status().message());
      continue;
    }
    Settled(*result);
    CountDecision(*item.rule, item.key, *result);
    AppendDecision(body, *result);
  }
  body += "]}";
  Finish(exchange);
}

bool Api::HandleAcquire(const Request& request, Exchange& exchange) {
  if (timers_ == nullptr) {
    Fail(exchange, 501, "this service does not wait for slots");
    return false;
  }
  json document;
  if (!ParseBody(request, exchange, document)) return false;
  const auto wait = document.find("max_wait_ms");
  const uint64_t most_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(kMaxAcquireWait).count();
  if (wait == document.end()) {
    Fail(exchange, 400, "missing field 'max_wait_ms'");
    return false;
  }
  if (!wait->is_number_unsigned() || wait->get<uint64_t>() > most_ms) {
    Fail(exchange, 400, fmt::format("'max_wait_ms' must be an integer between 0 and {}", most_ms));
    return false;
  }
  const Duration max_wait = std::chrono::milliseconds(wait->get<uint64_t>());
  document.erase(wait);
  std::shared_ptr<const RuleTable> rules = this->rules();
  auto check = ParseCheck(document, *rules);
  if (!check.ok()) {
    Fail(exchange, 400, check.status().message());
    return false;
  }
  const ServedRule& rule = *check->rule;
  const std::shared_ptr<RuleAcquirer> line = AcquirerFor(rule);
  if (line == nullptr) {
    Fail(exchange, 503, "the service is stopping and takes no new acquires");
    return false;
  }
  exchange.rules_ = std::move(rules);
  exchange.rule_ = &rule;
  exchange.key_.assign(check->request.key);
  if (!TakeWaiterPlace(rule)) {
    Acquisition refused;
    refused.outcome = AcquireOutcome::kQueueFull;
    OnAcquired(exchange, std::move(refused));
    return false;
  }
  auto pending = std::make_shared<PendingAcquire>(line);
  exchange.acquire_ = pending;
  const AcquireId id = line->acquirer.AcquireAsync(
      check->request.key, check->request.cost, max_wait,
      [this, &exchange, pending](Result<Acquisition> acquired) {
        std::shared_ptr<RuleAcquirer> ended;  // released after the answer, as it may be the last
        {
          core::MutexLock lock(pending->mu);
          ended = std::move(pending->line);
        }
        ReleaseWaiterPlace(*exchange.rule_);
        OnAcquired(exchange, std::move(acquired));
      });
  const auto still_waits = [&] {
    core::MutexLock lock(pending->mu);
    pending->id = id;
    return pending->line != nullptr;
  };
  // A CancelWaits since AcquirerFor either cancelled this acquire or is seen here.
  if (still_waits() && draining_.load()) line->acquirer.Cancel(id);
  return still_waits();
}

std::shared_ptr<RuleAcquirer> Api::AcquirerFor(const ServedRule& rule) {
  core::MutexLock lock(acquirers_mu_);
  if (draining_.load()) return nullptr;
  std::shared_ptr<RuleAcquirer>& line = acquirers_[rule.name];
  if (line && line->Serves(rule)) return line;
  if (line) {
    std::erase_if(retired_, [](const std::weak_ptr<RuleAcquirer>& r) { return r.expired(); });
    retired_.push_back(line);
  }
  line = std::make_shared<RuleAcquirer>(store_, rule, *timers_);
  return line;
}

bool Api::TakeWaiterPlace(const ServedRule& rule) {
  if (!TakePlace(waiters_, max_waiters_.load())) return false;
  if (TakePlace(rule.counters->waiters, rule.max_waiters)) return true;
  waiters_.fetch_sub(1);
  return false;
}

void Api::ReleaseWaiterPlace(const ServedRule& rule) {
  rule.counters->waiters.fetch_sub(1);
  waiters_.fetch_sub(1);
}

void Api::SetMaxWaiters(size_t max_waiters) { max_waiters_.store(max_waiters); }

void Api::OnAcquired(Exchange& exchange, Result<Acquisition> acquired) {
  const std::shared_ptr<const RuleTable> rules = std::move(exchange.rules_);
  const ServedRule& rule = *exchange.rule_;
  if (!acquired.ok()) return Undecided(exchange, acquired.status());
  metrics_.CountAcquire(*rule.counters, acquired->outcome);
  Response& response = exchange.response;
  fmt::format_to(std::back_inserter(response.body), R"({{"outcome":"{}","waited_ms":{})",
                 AcquireOutcomeName(acquired->outcome), CeilMillis(acquired->waited));
  // A decision's limit is the rule's count, never 0: 0 means no check was made (queue_full, or
  // cancelled in line).
  const Decision& decision = acquired->decision;
  if (decision.limit > 0) {
    Settled(decision);
    CountDecision(rule, exchange.key_, decision);
    response.body += R"(,"decision":)";
    AppendDecision(response.body, decision);
    response.AddHeader("RateLimit-Policy", rule.policy_header);
    response.AddHeader("RateLimit", middleware::RateLimitValue(rule.name, decision));
    if (!decision.allowed) response.AddHeader("Retry-After", middleware::RetryAfterValue(decision));
  }
  response.body += '}';
  response.AddHeader("Server-Timing", middleware::ServerTimingValue(acquired->waited));
  Finish(exchange);
}

void Api::Abandon(Exchange& exchange) {
  const std::shared_ptr<PendingAcquire> pending = exchange.acquire_;
  if (pending == nullptr) return;
  std::shared_ptr<RuleAcquirer> line;
  AcquireId id = 0;
  {
    core::MutexLock lock(pending->mu);
    line = pending->line;
    id = pending->id;
  }
  // Outside the lock: the cancelled acquire's callback takes it.
  if (line != nullptr) line->acquirer.Cancel(id);
}

void Api::CancelWaits() {
  std::vector<std::shared_ptr<RuleAcquirer>> lines;
  {
    core::MutexLock lock(acquirers_mu_);
    draining_.store(true);
    for (const auto& [name, line] : acquirers_) lines.push_back(line);
    for (const auto& retired : retired_) {
      if (auto line = retired.lock()) lines.push_back(std::move(line));
    }
  }
  for (const auto& line : lines) line->acquirer.CancelAll();
}

void Api::HandleReady(Exchange& exchange) {
  store_.ProbeAsync([this, &exchange](Result<Decision> decision) {
    Response& response = exchange.response;
    if (!decision.ok()) {
      StoreFailed(decision.status().ToString());
      response.status = 503;
      response.body = R"({"error":)";
      AppendJsonString(response.body, "store unavailable: " + decision.status().message());
    } else {
      StoreAnswered();
      response.body = R"({"status":"ready")";
    }
    if (health_ != nullptr) {
      fmt::format_to(std::back_inserter(response.body), R"(,"breaker":"{}")",
                     BreakerStateName(health_->breaker_state()));
    }
    response.body += '}';
    Finish(exchange);
  });
}

void Api::CountDecision(const ServedRule& rule, std::string_view key, const Decision& decision) {
  metrics_.CountDecision(*rule.counters, decision);
  if (!decision.allowed) top_keys_.Record(rule.name, key);
}

void Api::HandleTop(const Request& request, Exchange& exchange) {
  if (!expose_keys_.load()) {
    return Fail(exchange, 403, "keys are hidden: set server.expose_keys: true to show them");
  }
  const size_t query_at = request.target.find('?');
  auto query =
      ParseTopQuery(query_at == std::string_view::npos ? "" : request.target.substr(query_at + 1),
                    top_keys_.options().counters_per_rule);
  if (!query.ok()) return Fail(exchange, 400, query.status().message());
  const std::shared_ptr<const RuleTable> rules = this->rules();
  std::string& body = exchange.response.body;
  if (query->rule) {
    const ServedRule* rule = rules->Find(*query->rule);
    if (rule == nullptr) return Fail(exchange, 404, "no rule '" + *query->rule + "'");
    AppendTopJson(body, rule->name, top_keys_.Top(rule->name, query->n));
  } else {
    body += R"({"rules":[)";
    for (const ServedRule& rule : rules->all()) {
      if (&rule != &rules->all().front()) body += ',';
      AppendTopJson(body, rule.name, top_keys_.Top(rule.name, query->n));
    }
    body += "]}";
  }
  exchange.response.AddHeader("Cache-Control", "no-store");
  Finish(exchange);
}

void Api::Refuse(int status, std::string_view message, Response& response) {
  response.Reset();
  response.status = status;
  AppendError(response.body, message);
  metrics_.CountHttpResponse(status);
}

void Api::Fail(Exchange& exchange, int status, std::string_view message) {
  Response& response = exchange.response;
  response.status = status;
  response.body.clear();
  AppendError(response.body, message);
  Finish(exchange);
}

void Api::Undecided(Exchange& exchange, const Status& error) {
  StoreFailed(error.ToString());
  const middleware::Refusal refusal = middleware::RefusalOf(error);
  if (!refusal.retry_after.empty()) exchange.response.AddHeader("Retry-After", refusal.retry_after);
  Fail(exchange, refusal.status, error.message());
}

void Api::Finish(Exchange& exchange) {
  metrics_.CountHttpResponse(exchange.response.status);
  exchange.on_done_();
}

void Api::StoreAnswered() {
  if (!store_healthy_.load(std::memory_order_relaxed) && !store_healthy_.exchange(true)) {
    spdlog::info("store is answering again");
  }
}

void Api::StoreFailed(std::string_view why) {
  metrics_.CountStoreError();
  if (store_healthy_.exchange(false)) spdlog::warn("store failed: {}", why);
}

void Api::Settled(const Decision& decision) {
  if (decision.degraded()) {
    StoreFailed(
        fmt::format("deciding by failure policy ({})", DecisionSourceName(decision.source)));
  } else if (decision.source == DecisionSource::kStore) {
    StoreAnswered();
  }
}

}  // namespace sluice::http
