// The requests the Api refused before any handler (http/api.h: 401, 403, 429), counted per
// reason (auth::AuthRefusal) and shown on /metrics as sluice_auth_refused_total{reason}.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "auth/callers.h"

namespace sluice::http {

class AuthRefusals {
 public:
  void Count(auth::AuthRefusal refusal) {
    counts_[static_cast<size_t>(refusal)].fetch_add(1, std::memory_order_relaxed);
  }

  // The Prometheus text of the counts, every reason included.
  std::string Exposition() const;

 private:
  std::array<std::atomic<uint64_t>, auth::kAuthRefusalCount> counts_{};
};

}  // namespace sluice::http
