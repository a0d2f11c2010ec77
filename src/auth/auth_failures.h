// The failed authentications of each peer address, limited with sluice's own in-process limiter:
// beyond kMaxAuthFailuresPerSecond failures from one address within a second, its requests are
// refused before their token is even hashed, so that guessing tokens costs a client time.
// Memory is bounded by the in-process store's (kAuthFailureMemory): past it, old addresses'
// counts are forgotten first.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"

namespace sluice::auth {

inline constexpr int64_t kMaxAuthFailuresPerSecond = 10;
inline constexpr size_t kAuthFailureMemory = size_t{1} << 20;

class AuthFailures {
 public:
  explicit AuthFailures(const Clock* clock = nullptr);

  // Whether `peer` has failed too often lately: its request should be refused (429) unread.
  bool Throttled(std::string_view peer) const;
  // `peer` failed to authenticate once more.
  void Count(std::string_view peer);

 private:
  MemoryStore store_;
  Limiter failures_;
};

}  // namespace sluice::auth
