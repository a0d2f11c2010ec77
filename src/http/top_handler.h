// GET /v1/top?rule=api&n=10: the keys each rule denied most over the last minutes (one rule, or
// every rule without `rule`), as http/top_keys_json.h writes them; 403 unless the keys are
// exposed (SetExposeKeys), for keys are the clients' identities.
//
// Thread safety: every method may be called concurrently, each Handle with its own Exchange.
#pragma once

#include <atomic>
#include <string_view>

#include "http/answers.h"
#include "http/handler.h"
#include "http/top_keys.h"

namespace sluice::http {

class TopHandler final : public Handler {
 public:
  // `top_keys` and `answers` must outlive this object.
  TopHandler(const TopKeys& top_keys, Answers& answers) : top_keys_(top_keys), answers_(answers) {}

  bool Handle(Call& call, Exchange& exchange) override;
  // Whether the keys are shown (default: no, 403).
  void SetExposeKeys(bool expose) { expose_keys_.store(expose); }

 private:
  void Answer(std::string_view target, const RuleTable& rules, Exchange& exchange);

  const TopKeys& top_keys_;
  Answers& answers_;
  std::atomic<bool> expose_keys_{false};
};

}  // namespace sluice::http
