// POST /json: a front end beside the Api's own answers it (envoyproxy/ratelimit's JSON endpoint,
// rls/json_endpoint.h, given by Api::SetJsonRoute). The route gets the body and the request's
// caller (Request::caller, for the same admission as the Api's checks) and calls its `done` once,
// on the calling thread or a store's, with the status and the JSON body of the answer.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange, if the route
// may be.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/fair_admission.h"
#include "http/answers.h"
#include "http/handler.h"

namespace sluice::http {

using JsonDone = std::function<void(int status, std::string body)>;
using JsonRoute =
    std::function<void(std::string_view body, core::FairAdmission::Caller caller, JsonDone done)>;

class JsonRouteHandler final : public Handler {
 public:
  // `answers` must outlive this object.
  JsonRouteHandler(JsonRoute route, Answers& answers)
      : route_(std::move(route)), answers_(answers) {}

  bool Handle(Call& call, Exchange& exchange) override;

 private:
  const JsonRoute route_;
  Answers& answers_;
};

}  // namespace sluice::http
