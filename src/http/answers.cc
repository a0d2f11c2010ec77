#include "http/answers.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/api_json.h"
#include "middleware/rate_limit_headers.h"
#include "middleware/refusal.h"
#include "sluice/store.h"

namespace sluice::http {

size_t Answers::Admit(Exchange& exchange, size_t units, bool partial) {
  if (const size_t admitted = AdmitMore(exchange, units, partial)) return admitted;
  exchange.response.AddHeader("Retry-After",
                              std::to_string(core::FairAdmission::kRetryAfterSeconds));
  Fail(exchange, 503,
       fmt::format("the service is busy: {} check(s) would take this connection past its share "
                   "of the store's work in flight ({} checks); retry later",
                   units, admission_->budget()));
  return 0;
}

size_t Answers::AdmitMore(Exchange& exchange, size_t units, bool partial) {
  if (admission_ == nullptr) return units;
  Exchange::Admitted& admitted = exchange.admitted;
  admitted.ticket = admission_->Admit(exchange.caller(), units, partial);
  admitted.at = std::chrono::steady_clock::now();
  if (!admitted.ticket) metrics_.CountAdmissionRefused();
  return admitted.ticket.units();
}

void Answers::StoreAnsweredAdmitted(Exchange& exchange) {
  Exchange::Admitted& admitted = exchange.admitted;
  if (!admitted.ticket) return;
  admitted.ticket.Answered(
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - admitted.at));
}

void Answers::Finish(Exchange& exchange) {
  StoreAnsweredAdmitted(exchange);
  metrics_.CountHttpResponse(exchange.response.status);
  exchange.Done();
}

void Answers::Fail(Exchange& exchange, int status, std::string_view message) {
  Response& response = exchange.response;
  response.status = status;
  response.body.clear();
  AppendError(response.body, message);
  Finish(exchange);
}

void Answers::Undecided(Exchange& exchange, const Status& error) {
  StoreFailed(error);
  const middleware::Refusal refusal = middleware::RefusalOf(error);
  if (!refusal.retry_after.empty()) exchange.response.AddHeader("Retry-After", refusal.retry_after);
  Fail(exchange, refusal.status, error.message());
}

void Answers::Refuse(int status, std::string_view message, Response& response) {
  response.Reset();
  response.status = status;
  AppendError(response.body, message);
  metrics_.CountHttpResponse(status);
}

void Answers::Decided(const ServedRule& rule, std::string_view key, const Decision& decision) {
  if (decision.degraded()) {
    StoreFailed(
        fmt::format("deciding by failure policy ({})", DecisionSourceName(decision.source)));
  } else if (decision.source == DecisionSource::kStore) {
    StoreAnswered();
  }
  metrics_.CountDecision(*rule.counters, decision, rule.shadow_mode);
  if (!rule.Admits(decision)) top_keys_.Record(rule.name(), key);
}

void Answers::StoreAnswered() {
  if (!store_healthy_.load(std::memory_order_relaxed) && !store_healthy_.exchange(true)) {
    spdlog::info("store is answering again");
  }
}

void Answers::StoreFailed(std::string_view why) {
  metrics_.CountStoreError();
  if (store_healthy_.exchange(false)) spdlog::warn("store failed: {}", why);
}

void Answers::StoreFailed(const Status& error) {
  if (IsStoreOutage(error)) return StoreFailed(error.ToString());
  metrics_.CountStoreError();
  refusals_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t due = next_refusal_warning_.load(std::memory_order_relaxed);
  if (now < due) return;
  const int64_t next = now + std::chrono::nanoseconds(kRefusalWarningInterval).count();
  if (!next_refusal_warning_.compare_exchange_strong(due, next)) return;
  spdlog::warn("store refused {} check(s) since the last such warning, the last: {}",
               refusals_.exchange(0), error.ToString());
}

void AddRateLimitHeaders(const ServedRule& rule, const Decision& decision, Response& response) {
  response.AddHeader("RateLimit-Policy", rule.policy_header);
  response.AddHeader("RateLimit", middleware::RateLimitValue(rule.name(), decision));
  if (!rule.Admits(decision)) {
    response.AddHeader("Retry-After", middleware::RetryAfterValue(decision));
  }
}

}  // namespace sluice::http
