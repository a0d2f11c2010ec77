// envoyproxy/ratelimit's HTTP endpoint, POST /json: a RateLimitRequest in protobuf's JSON mapping
// (fields in lowerCamelCase or as named in the .proto) answered with the RateLimitResponse as
// JSON, 200 when the overall code is OK and 429 when OVER_LIMIT; 400 for a body that is not a
// RateLimitRequest (or has a key twice in an object: json/client_json.h) or a request the service
// refuses, 503 when the store is out (and no failure
// policy decided), 500 for any other error, each with {"error":"..."}.
// Thread safety: as Service::ShouldRateLimit.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "rls/service.h"

namespace sluice::rls {

// Calls `done` once, on this thread or a store thread, with the status code and the body.
// `caller`: the HTTP connection, for the service's admission. Refused there: 429, as OVER_LIMIT.
void AnswerJson(Service& service, std::string_view body,
                std::function<void(int status, std::string body)> done,
                core::FairAdmission::Caller caller = 0);

}  // namespace sluice::rls
