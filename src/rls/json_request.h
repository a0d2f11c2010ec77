// A RateLimitRequest read from protobuf's JSON mapping, as envoyproxy/ratelimit's POST /json takes
// it. The descriptor entries' key and value are bytes in sluice's protos (proto/README.md: so that
// gRPC decides values that are not UTF-8), which the mapping would read as base64; here they are
// read as the JSON strings they are in Envoy's API.
// Thread safety: may be called concurrently.
#pragma once

#include <string_view>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "sluice/status.h"

namespace sluice::rls {

// Parses `json` into `request`; INVALID_ARGUMENT, with the parser's reason, for a body that is
// not a RateLimitRequest.
Status ParseRateLimitRequestJson(std::string_view json,
                                 envoy::service::ratelimit::v3::RateLimitRequest& request);

}  // namespace sluice::rls
