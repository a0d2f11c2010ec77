// How the HTTP front ends, `sluice serve` and the middleware, answer a check that came back as an
// error instead of a decision. A store outage (IsStoreOutage) that no failure policy decided, or
// a full store (RESOURCE_EXHAUSTED): 503 with a Retry-After, as the service may answer again in a
// moment. Anything else (INTERNAL: a fault of the store or of sluice, such as a Lua script's
// error): 500, with no Retry-After. Either way the request is refused, never admitted. Pure
// functions; thread-safe.
#pragma once

#include <string>

#include "sluice/status.h"

namespace sluice::middleware {

struct Refusal {
  int status = 500;
  std::string retry_after;  // the Retry-After value in seconds; empty for none
};

// `error` must not be ok.
Refusal RefusalOf(const Status& error);

}  // namespace sluice::middleware
