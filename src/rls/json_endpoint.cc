#include "rls/json_endpoint.h"

#include <google/protobuf/util/json_util.h>

#include <memory>
#include <nlohmann/json.hpp>

namespace sluice::rls {
namespace {

// The message may quote the request's bytes, which need not be UTF-8.
std::string ErrorBody(std::string_view message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

int HttpStatusOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kCostExceedsLimit:
      return 400;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
      return 503;
    default:
      return 500;
  }
}

}  // namespace

void AnswerJson(Service& service, std::string_view body,
                std::function<void(int status, std::string body)> done,
                core::FairAdmission::Caller caller) {
  struct Call {
    pb::RateLimitRequest request;
    pb::RateLimitResponse response;
  };
  auto call = std::make_shared<Call>();
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), &call->request);
  if (!parsed.ok()) {
    return done(400, ErrorBody("not a RateLimitRequest: " + parsed.message().as_string()));
  }
  service.ShouldRateLimit(
      call->request, call->response,
      [call, done = std::move(done)](Status status) {
        if (!status.ok()) return done(HttpStatusOf(status), ErrorBody(status.message()));
        std::string json;
        if (const auto printed = google::protobuf::util::MessageToJsonString(call->response, &json);
            !printed.ok()) {
          return done(500,
                      ErrorBody("cannot print the response: " + printed.message().as_string()));
        }
        const bool over = call->response.overall_code() == pb::RateLimitResponse::OVER_LIMIT;
        done(over ? 429 : 200, std::move(json));
      },
      caller);
}

}  // namespace sluice::rls
