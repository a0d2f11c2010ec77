// GET /metrics: the Prometheus text exposition of the service (http/metrics.h), then the lines of
// a front end beside the Api's own when one is set (the Envoy rate limit service's,
// Api::SetJsonRoute), then the counts of the requests refused before any handler
// (auth/refusal_counts.h).
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange; SetFrontEnd
// must be called before serving.
#pragma once

#include <functional>
#include <string>

#include "auth/refusal_counts.h"
#include "http/answers.h"
#include "http/handler.h"
#include "http/metrics.h"

namespace sluice::http {

class MetricsHandler final : public Handler {
 public:
  // `metrics`, `refusals` and `answers` must outlive this object.
  MetricsHandler(const Metrics& metrics, const auth::RefusalCounts& refusals, Answers& answers)
      : metrics_(metrics), refusals_(refusals), answers_(answers) {}

  bool Handle(Call& call, Exchange& exchange) override;
  // The front end's lines, written after the service's own.
  void SetFrontEnd(std::function<std::string()> exposition) { front_end_ = std::move(exposition); }

 private:
  const Metrics& metrics_;
  const auth::RefusalCounts& refusals_;
  Answers& answers_;
  std::function<std::string()> front_end_;
};

}  // namespace sluice::http
