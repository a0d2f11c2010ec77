#include "rls/json_endpoint.h"

#include <google/protobuf/util/json_util.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "json/client_json.h"
#include "rls/json_request.h"

namespace sluice::rls {
namespace {

// The message may quote the request's bytes, which need not be UTF-8.
std::string ErrorBody(std::string_view message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

// protobuf's JSON reads a field under its .proto name or its JSON name ("hits_addend",
// "hitsAddend"), the last one given winning: two spellings of one field are one key twice.
// Returns one spelling of a field given twice in `object` (read as `type`) or in a message within
// it; empty when there is none.
std::string FieldGivenTwice(const nlohmann::json& object,
                            const google::protobuf::Descriptor& type) {
  if (!object.is_object()) return "";
  std::set<const google::protobuf::FieldDescriptor*> given;
  for (const auto& [key, value] : object.items()) {
    const google::protobuf::FieldDescriptor* field = type.FindFieldByName(key);
    if (field == nullptr) field = type.FindFieldByCamelcaseName(key);
    if (field == nullptr) continue;  // protobuf refuses it
    if (!given.insert(field).second) return key;
    const google::protobuf::Descriptor* inner = field->message_type();
    if (inner == nullptr) continue;
    if (!value.is_array()) {
      if (std::string twice = FieldGivenTwice(value, *inner); !twice.empty()) return twice;
      continue;
    }
    for (const nlohmann::json& item : value) {
      if (std::string twice = FieldGivenTwice(item, *inner); !twice.empty()) return twice;
    }
  }
  return "";
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
  auto read = sluice::json::ReadClientJson(body);
  if (!read.ok()) return done(400, ErrorBody(read.status().message()));
  if (const std::string twice = FieldGivenTwice(*read, *pb::RateLimitRequest::descriptor());
      !twice.empty()) {
    return done(400, ErrorBody("field '" + twice + "' is given twice, under both of its names"));
  }
  auto call = std::make_shared<Call>();
  if (Status parsed = ParseRateLimitRequestJson(body, call->request); !parsed.ok()) {
    return done(400, ErrorBody(parsed.message()));
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
