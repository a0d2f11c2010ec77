// POST /v1/check: one check, {"rule":"api","key":"user:42","cost":1}, answered with its decision
// and RateLimit headers (http/rule_check.h); or a batch, {"checks":[{...},...]} (at most
// kMaxBatchChecks), answered {"results":[...]} in order, every request built by its rule's Limiter
// and all decided in one store round trip (Store::CheckBatchAsync), an item that cannot be decided
// answered {"error":"..."}. See http/api.h for the answers.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>

#include "http/answers.h"
#include "http/handler.h"
#include "http/metrics.h"
#include "http/rule_check.h"
#include "sluice/store.h"

namespace sluice::http {

inline constexpr size_t kMaxBatchChecks = 1000;

class CheckHandler final : public Handler {
 public:
  // `store` is the one the rules are built over; it, `metrics` and `answers` must outlive this
  // object.
  CheckHandler(Store& store, Metrics& metrics, Answers& answers);

  bool Handle(Call& call, Exchange& exchange) override;

 private:
  void HandleBatch(const nlohmann::json& checks, Call& call, Exchange& exchange);
  // Sends the batch's next `n` checks; once answered, the next part, as far as admitted, or the
  // answer.
  void SendBatch(Exchange& exchange, size_t n);
  void OnBatch(Exchange& exchange);

  Store& store_;
  Metrics& metrics_;
  Answers& answers_;
  RuleCheck check_;
};

}  // namespace sluice::http
