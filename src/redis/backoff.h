// The reconnection backoff of a Redis connection (ClientOptions::reconnect_min/max): how long to
// wait before the next attempt, and the backoff of the attempt after it. A pure function of its
// arguments, so that it can be tested without a server.
//
// Thread safety: no state of its own; the random source is the caller's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

#include "sluice/clock.h"

namespace sluice::redis {

struct ReconnectWait {
  Duration delay;    // before this attempt: within [backoff / 2, backoff]
  Duration backoff;  // for the attempt after it: doubled, at most `max`
};

// `backoff` is the previous attempt's (reconnect_min after a success), clamped to [min, max].
// Equal jitter: half the backoff is fixed and half random, so clients that lost Redis together
// spread their attempts out instead of storming it when it returns.
inline ReconnectWait NextReconnectWait(Duration backoff, Duration min, Duration max,
                                       std::mt19937_64& random) {
  const Duration current = std::clamp(backoff, min, max);
  const int64_t half = current.count() / 2;
  std::uniform_int_distribution<int64_t> spread(0, current.count() - half);
  return {.delay = Duration(half + spread(random)),
          .backoff = current > max / 2 ? max : current * 2};
}

}  // namespace sluice::redis
