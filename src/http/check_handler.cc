#include "http/check_handler.h"

#include <fmt/format.h>

#include <cassert>
#include <chrono>
#include <nlohmann/json.hpp>

#include "http/api_json.h"

namespace sluice::http {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void CheckHandler::Handle(const json& document, std::shared_ptr<const RuleTable> rules,
                          Exchange& exchange) {
  if (auto checks = document.find("checks"); checks != document.end()) {
    if (document.size() != 1) {
      return answers_.Fail(exchange, 400, "a batch has one field, 'checks'");
    }
    return HandleBatch(*checks, std::move(rules), exchange);
  }

  auto check = ParseCheck(document, *rules);
  if (!check.ok()) return answers_.Fail(exchange, 400, check.status().message());
  exchange.rules_ = std::move(rules);
  exchange.rule_ = check->rule;
  exchange.key_.assign(check->request.key);
  if (answers_.Admit(exchange, 1) == 0) return;
  exchange.started_ = Clock::now();
  store_.CheckAsync(check->request, [this, &exchange](Result<Decision> decision) {
    OnDecision(exchange, std::move(decision));
  });
}

void CheckHandler::OnDecision(Exchange& exchange, Result<Decision> decision) {
  metrics_.ObserveCheckDuration(Clock::now() - exchange.started_);
  const std::shared_ptr<const RuleTable> rules = std::move(exchange.rules_);
  const ServedRule& rule = *exchange.rule_;
  if (!decision.ok()) return answers_.Undecided(exchange, decision.status());
  answers_.Decided(rule, exchange.key_, *decision);
  AppendDecision(exchange.response.body, rule, *decision);
  AddRateLimitHeaders(rule, *decision, exchange.response);
  answers_.Finish(exchange);
}

void CheckHandler::HandleBatch(const json& checks, std::shared_ptr<const RuleTable> rules,
                               Exchange& exchange) {
  if (!checks.is_array()) return answers_.Fail(exchange, 400, "'checks' must be an array");
  if (checks.size() > kMaxBatchChecks) {
    return answers_.Fail(
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
      // The later parts of the batch are sent after the request's body is gone: each request
      // points to its own copy of the key.
      CheckRequest request = check->request;
      request.key = item.key;
      exchange.requests_.push_back(request);
    } else {
      item.rule = nullptr;
      item.error = check.status().message();
    }
  }
  exchange.rules_ = std::move(rules);
  if (exchange.requests_.empty()) return OnBatch(exchange, {});
  // A batch larger than its connection's share goes in parts, each admitted once the last is
  // answered, so that it never queues more than its share ahead of the other callers' checks.
  const size_t first = answers_.Admit(exchange, exchange.requests_.size(), /*partial=*/true);
  if (first == 0) return;
  exchange.results_.clear();
  exchange.started_ = Clock::now();
  SendBatch(exchange, first);
}

void CheckHandler::SendBatch(Exchange& exchange, size_t n) {
  const std::span<const CheckRequest> part(exchange.requests_.data() + exchange.results_.size(), n);
  store_.CheckBatchAsync(part, [this, &exchange](std::vector<Result<Decision>> results) {
    answers_.StoreAnsweredAdmitted(exchange);
    for (Result<Decision>& result : results) exchange.results_.push_back(std::move(result));
    const size_t left = exchange.requests_.size() - exchange.results_.size();
    if (left > 0) {
      if (const size_t next = answers_.AdmitMore(exchange, left, /*partial=*/true)) {
        return SendBatch(exchange, next);
      }
      for (size_t i = 0; i < left; ++i) {
        exchange.results_.push_back(Status::ResourceExhausted(
            "the service is busy: the rest of this batch would take its connection past its "
            "share of the store's work in flight; retry later"));
      }
    }
    metrics_.ObserveCheckDuration(Clock::now() - exchange.started_);
    OnBatch(exchange, std::move(exchange.results_));
  });
}

void CheckHandler::OnBatch(Exchange& exchange, std::vector<Result<Decision>> results) {
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
      answers_.StoreFailed(result.status());
      AppendError(body, result.status().message());
      continue;
    }
    answers_.Decided(*item.rule, item.key, *result);
    AppendDecision(body, *item.rule, *result);
  }
  body += "]}";
  answers_.Finish(exchange);
}

}  // namespace sluice::http
