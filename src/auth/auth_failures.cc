#include "auth/auth_failures.h"

#include <chrono>

namespace sluice::auth {
namespace {

Limit FailureLimit() {
  return *Limit::Create(Algorithm::kFixedWindow, kMaxAuthFailuresPerSecond,
                        std::chrono::seconds(1));
}

// An address without one (a unit test's request) still has its own count.
std::string_view KeyOf(std::string_view peer) { return peer.empty() ? "-" : peer; }

}  // namespace

AuthFailures::AuthFailures(const Clock* clock)
    : store_(MemoryStoreOptions{.clock = clock, .max_memory = kAuthFailureMemory, .shards = 1}),
      failures_(store_, "auth_failures", FailureLimit()) {}

bool AuthFailures::Throttled(std::string_view peer) const {
  // A peek: cost 0 consumes nothing. Should the in-process store ever fail, the token is checked
  // as usual, which is what decides anyway.
  const auto decision = failures_.Check(KeyOf(peer), 0);
  return decision.ok() && decision->remaining == 0;
}

void AuthFailures::Count(std::string_view peer) { (void)failures_.Check(KeyOf(peer), 1); }

}  // namespace sluice::auth
