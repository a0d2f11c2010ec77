// GET /healthz: 200 {"status":"ok"} while the process serves. It asks nothing of the store (that
// is GET /readyz, http/ready_handler.h) and keeps nothing of a request.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include "http/answers.h"
#include "http/handler.h"

namespace sluice::http {

class HealthHandler final : public Handler {
 public:
  // `answers` must outlive this object.
  explicit HealthHandler(Answers& answers) : answers_(answers) {}

  bool Handle(Call& call, Exchange& exchange) override;

 private:
  Answers& answers_;
};

}  // namespace sluice::http
