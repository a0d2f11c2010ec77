// GET of one of the dashboard's files (/, /ui, /ui/app.js, ...: http/dashboard.h), with its type
// and the dashboard's headers. The files hold no data: the page reads /metrics and /v1/top.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include "http/answers.h"
#include "http/handler.h"

namespace sluice::http {

class DashboardHandler final : public Handler {
 public:
  // `answers` must outlive this object.
  explicit DashboardHandler(Answers& answers) : answers_(answers) {}

  // `call.path` must be a dashboard file's (FindDashboardFile finds it), as the Api routes it.
  bool Handle(Call& call, Exchange& exchange) override;

 private:
  Answers& answers_;
};

}  // namespace sluice::http
