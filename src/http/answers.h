// How the Api ends an exchange, and what it notes on the way: the error answers, the count of
// every answer and every decision (Metrics, and TopKeys for a denial), the RateLimit headers of a
// decision, and the store's health as the answers show it (a warning when it starts failing, a
// note when it answers again).
//
// Thread safety: every method may be called concurrently, each call with its own Exchange.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "http/exchange.h"
#include "http/metrics.h"
#include "http/rule_table.h"
#include "http/top_keys.h"
#include "sluice/decision.h"
#include "sluice/status.h"

namespace sluice::http {

class Answers {
 public:
  // `metrics` and `top_keys` must outlive this object.
  Answers(Metrics& metrics, TopKeys& top_keys) : metrics_(metrics), top_keys_(top_keys) {}

  // Where the checks of every front end are admitted; none when null (the default).
  void SetAdmission(core::FairAdmission* admission) { admission_ = admission; }
  // Admits `units` checks of the exchange's caller to the store, held until Finish or
  // StoreAnsweredAdmitted, and returns how many (all of them, or with `partial` as many as its
  // share allows); or answers 503 with Retry-After at once (nothing sent, nothing admitted) and
  // returns 0. Without an admission, admits everything.
  size_t Admit(Exchange& exchange, size_t units, bool partial = false);
  // The same for the rest of a batch: refused, returns 0 and answers nothing.
  size_t AdmitMore(Exchange& exchange, size_t units, bool partial);
  // The store answered what the exchange holds: gives it back, with the time it took.
  void StoreAnsweredAdmitted(Exchange& exchange);
  // Completes the exchange: gives back its admitted units, counts its status and calls its
  // on_done.
  void Finish(Exchange& exchange);
  // Answers {"error": message} with `status`.
  void Fail(Exchange& exchange, int status, std::string_view message);
  // Refuses a check or an acquire the store answered with an error (middleware::RefusalOf).
  void Undecided(Exchange& exchange, const Status& error);
  // The response to a request the HTTP layer refused before it reached the Api.
  void Refuse(int status, std::string_view message, Response& response);

  // A decision of `rule` for `key`: counted (a rule in shadow mode's would-be verdict apart), the
  // key noted in TopKeys if denied (not a shadow rule's: it denies nothing), and the path that
  // decided noted: the store answering, or a failure policy standing in for it.
  void Decided(const ServedRule& rule, std::string_view key, const Decision& decision);
  void StoreAnswered();
  // Counts a store error, and warns when the store was answering until now.
  void StoreFailed(std::string_view why);
  // A check the store answered with `error`: an outage as StoreFailed; any other error (a full
  // store, a fault of one key) is counted and warned of at most once per kRefusalWarningInterval,
  // with how many there were: the store is answering, and a client that keeps causing such
  // errors must not flood the log.
  void StoreFailed(const Status& error);

  static constexpr std::chrono::seconds kRefusalWarningInterval{10};

 private:
  Metrics& metrics_;
  TopKeys& top_keys_;
  core::FairAdmission* admission_ = nullptr;
  std::atomic<bool> store_healthy_{true};
  std::atomic<uint64_t> refusals_{0};             // since the last warning of them
  std::atomic<int64_t> next_refusal_warning_{0};  // steady clock, ns
};

// The RateLimit-Policy, RateLimit and, when `rule` denies, Retry-After headers of `decision`. A
// rule in shadow mode sends its RateLimit as decided (remaining 0 when it would deny), and no
// Retry-After.
void AddRateLimitHeaders(const ServedRule& rule, const Decision& decision, Response& response);

}  // namespace sluice::http
