// The calls a front end refused before deciding anything (no token, an unknown one, a scope or
// rule not allowed, throttled after failures), counted per reason (AuthRefusal) and written out as
// one Prometheus counter with a `reason` label. The HTTP API and the gRPC service each keep one.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "auth/callers.h"

namespace sluice::auth {

class RefusalCounts {
 public:
  void Count(AuthRefusal refusal) {
    counts_[static_cast<size_t>(refusal)].fetch_add(1, std::memory_order_relaxed);
  }

  // The Prometheus text of counter `name`, described by `help`, every reason included.
  std::string Exposition(std::string_view name, std::string_view help) const;

 private:
  std::array<std::atomic<uint64_t>, kAuthRefusalCount> counts_{};
};

}  // namespace sluice::auth
