// One check of a rule for a key, decided as /v1/check and /v1/auth decide it: the connection's
// share of the store's work admitted (http/answers.h), the request sent to the store the rules
// are built over, timed, its answer noted (Answers::Decided; Answers::Undecided for an error
// instead of a decision) and its RateLimit headers added; the front end then writes its own
// answer of the decision (a JSON decision, a status) and the exchange is finished. A rule in shadow
// mode answers as its ServedRule::Admits says.
//
// Thread safety: Decide may be called concurrently, each call with its own Exchange.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "http/answers.h"
#include "http/exchange.h"
#include "http/metrics.h"
#include "http/rule_table.h"
#include "sluice/store.h"

namespace sluice::http {

class RuleCheck {
 public:
  // Writes the front end's answer of `decision` by `rule` into `response`, which has its RateLimit
  // headers already.
  using Answer = void (*)(const ServedRule& rule, const Decision& decision, Response& response);

  // `store` is the one the rules are built over; it, `metrics` and `answers` must outlive this
  // object.
  RuleCheck(Store& store, Metrics& metrics, Answers& answers, Answer answer)
      : store_(store), metrics_(metrics), answers_(answers), answer_(answer) {}

  // Decides `request` (built by `rule`'s Limiter; its key need only live until Decide returns) and
  // answers it. `rules` holds `rule`.
  void Decide(std::shared_ptr<const RuleTable> rules, const ServedRule& rule,
              const CheckRequest& request, Exchange& exchange);

 private:
  // What a check keeps until its answer.
  struct State {
    std::shared_ptr<const RuleTable> rules;
    const ServedRule* rule = nullptr;
    std::string key;  // for TopKeys, should it be denied
    std::chrono::steady_clock::time_point started;
  };

  void OnDecision(Exchange& exchange, Result<Decision> decision);

  Store& store_;
  Metrics& metrics_;
  Answers& answers_;
  const Answer answer_;
};

}  // namespace sluice::http
