// GET /readyz: 200 {"status":"ready"} when the store's readiness probe answers (Store::ProbeAsync:
// a peek at an internal key), else 503 {"error":"store unavailable: ..."}; with a StoreHealth,
// the breaker's state too, "breaker":"closed". Through a ResilientStore the probe is the
// backend's own answer (a failure policy must not make it look ready), at once while the
// breaker is open.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include "http/answers.h"
#include "http/handler.h"
#include "sluice/store.h"
#include "sluice/store_health.h"

namespace sluice::http {

class ReadyHandler final : public Handler {
 public:
  // `store`, `answers` and `health` (when given) must outlive this object.
  ReadyHandler(Store& store, const StoreHealth* health, Answers& answers)
      : store_(store), health_(health), answers_(answers) {}

  bool Handle(Call& call, Exchange& exchange) override;

 private:
  Store& store_;
  const StoreHealth* const health_;
  Answers& answers_;
};

}  // namespace sluice::http
