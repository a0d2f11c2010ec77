#include "http/check_handler.h"

#include <fmt/format.h>

#include <cassert>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "http/api_json.h"

namespace sluice::http {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// What a batch keeps until its answer.
struct BatchState {
  struct Item {
    const ServedRule* rule = nullptr;  // null: `error` says why the item was not decided
    std::string error;
    std::string key;  // for TopKeys, should it be denied
  };

  std::shared_ptr<const RuleTable> rules;  // holds the items' rules while they are decided
  std::vector<Item> items;
  std::vector<CheckRequest> requests;     // of the items that have a rule, in order
  std::vector<Result<Decision>> results;  // of `requests`, as their parts are answered
  Clock::time_point started;
};

void AnswerDecision(const ServedRule& rule, const Decision& decision, Response& response) {
  AppendDecision(response.body, rule, decision);
}

}  // namespace

CheckHandler::CheckHandler(Store& store, Metrics& metrics, Answers& answers)
    : store_(store),
      metrics_(metrics),
      answers_(answers),
      check_(store, metrics, answers, AnswerDecision) {}

bool CheckHandler::Handle(Call& call, Exchange& exchange) {
  json document;
  if (!ReadBody(call.request, exchange, answers_, document)) return false;
  if (auto checks = document.find("checks"); checks != document.end()) {
    if (document.size() != 1) {
      answers_.Fail(exchange, 400, "a batch has one field, 'checks'");
    } else {
      HandleBatch(*checks, call, exchange);
    }
    return false;
  }
  auto check = ParseCheck(document, *call.rules);
  if (!check.ok()) {
    answers_.Fail(exchange, 400, check.status().message());
    return false;
  }
  check_.Decide(std::move(call.rules), *check->rule, check->request, exchange);
  return false;
}

void CheckHandler::HandleBatch(const json& checks, Call& call, Exchange& exchange) {
  if (!checks.is_array()) return answers_.Fail(exchange, 400, "'checks' must be an array");
  if (checks.size() > kMaxBatchChecks) {
    return answers_.Fail(
        exchange, 400,
        fmt::format("a batch holds at most {} checks, got {}", kMaxBatchChecks, checks.size()));
  }
  BatchState& batch = exchange.StateOf<BatchState>();
  batch.items.resize(checks.size());
  batch.requests.clear();
  batch.results.clear();
  for (size_t i = 0; i < checks.size(); ++i) {
    auto check = ParseCheck(checks[i], *call.rules);
    BatchState::Item& item = batch.items[i];
    if (check.ok()) {
      item.rule = check->rule;
      item.key.assign(check->request.key);
      // The later parts of the batch are sent after the request's body is gone: each request
      // points to its own copy of the key.
      CheckRequest request = check->request;
      request.key = item.key;
      batch.requests.push_back(request);
    } else {
      item.rule = nullptr;
      item.error = check.status().message();
    }
  }
  if (batch.requests.empty()) return OnBatch(exchange);
  // A batch larger than its connection's share goes in parts, each admitted once the last is
  // answered, so that it never queues more than its share ahead of the other callers' checks.
  const size_t first = answers_.Admit(exchange, batch.requests.size(), /*partial=*/true);
  if (first == 0) return;
  batch.rules = std::move(call.rules);
  batch.started = Clock::now();
  SendBatch(exchange, first);
}

void CheckHandler::SendBatch(Exchange& exchange, size_t n) {
  BatchState& batch = exchange.StateOf<BatchState>();
  const std::span<const CheckRequest> part(batch.requests.data() + batch.results.size(), n);
  store_.CheckBatchAsync(part, [this, &exchange](std::vector<Result<Decision>> results) {
    BatchState& batch = exchange.StateOf<BatchState>();
    answers_.StoreAnsweredAdmitted(exchange);
    for (Result<Decision>& result : results) batch.results.push_back(std::move(result));
    const size_t left = batch.requests.size() - batch.results.size();
    if (left > 0) {
      if (const size_t next = answers_.AdmitMore(exchange, left, /*partial=*/true)) {
        return SendBatch(exchange, next);
      }
      for (size_t i = 0; i < left; ++i) {
        batch.results.push_back(Status::ResourceExhausted(
            "the service is busy: the rest of this batch would take its connection past its "
            "share of the store's work in flight; retry later"));
      }
    }
    metrics_.ObserveCheckDuration(Clock::now() - batch.started);
    OnBatch(exchange);
  });
}

void CheckHandler::OnBatch(Exchange& exchange) {
  BatchState& batch = exchange.StateOf<BatchState>();
  // Holds the items' rules until the answer is complete; the exchange may serve another request
  // then.
  const std::shared_ptr<const RuleTable> rules = std::move(batch.rules);
  std::string& body = exchange.response.body;
  body += R"({"results":[)";
  size_t next = 0;
  for (size_t i = 0; i < batch.items.size(); ++i) {
    if (i > 0) body += ',';
    const BatchState::Item& item = batch.items[i];
    if (item.rule == nullptr) {
      AppendError(body, item.error);
      continue;
    }
    assert(next < batch.results.size());
    const Result<Decision>& result = batch.results[next++];
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
