// POST /v1/check: one check, {"rule":"api","key":"user:42","cost":1}, answered with its decision
// and RateLimit headers; or a batch, {"checks":[{...},...]} (at most kMaxBatchChecks), answered
// {"results":[...]} in order, every request built by its rule's Limiter and all decided in one
// store round trip (Store::CheckBatchAsync), an item that cannot be decided answered
// {"error":"..."}. See http/api.h for the answers.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "http/answers.h"
#include "http/exchange.h"
#include "http/metrics.h"
#include "http/rule_table.h"
#include "sluice/store.h"

namespace sluice::http {

inline constexpr size_t kMaxBatchChecks = 1000;

class CheckHandler {
 public:
  // `store` is the one the rules are built over; it, `metrics` and `answers` must outlive this
  // object.
  CheckHandler(Store& store, Metrics& metrics, Answers& answers)
      : store_(store), metrics_(metrics), answers_(answers) {}

  // `document` is the request's body, a JSON object; `rules` the rule set to decide it by.
  void Handle(const nlohmann::json& document, std::shared_ptr<const RuleTable> rules,
              Exchange& exchange);

 private:
  void HandleBatch(const nlohmann::json& checks, std::shared_ptr<const RuleTable> rules,
                   Exchange& exchange);
  void OnDecision(Exchange& exchange, Result<Decision> decision);
  // Sends the batch's next `n` checks; once answered, the next part, as far as admitted, or the
  // answer.
  void SendBatch(Exchange& exchange, size_t n);
  void OnBatch(Exchange& exchange, std::vector<Result<Decision>> results);

  Store& store_;
  Metrics& metrics_;
  Answers& answers_;
};

}  // namespace sluice::http
