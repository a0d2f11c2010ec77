// Decision: the answer to one check. A plain value.
#pragma once

#include <cstdint>

#include "sluice/clock.h"

namespace sluice {

struct Decision {
  bool allowed = false;
  // The configured count of the limit (requests per period).
  int64_t limit = 0;
  // Units that could still be admitted right now, after this request.
  int64_t remaining = 0;
  // When denied: the wait after which this same request would be admitted if no other traffic
  // comes. Zero when allowed.
  Duration retry_after{0};
  // The wait until the key's state is back to fresh (full quota); zero if it is fresh already.
  Duration reset_after{0};

  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace sluice
