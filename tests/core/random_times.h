// Times for the randomized traces of the algorithm tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

namespace sluice::core {

// The time after `t` in a random trace under a limit of `period` µs: another request at the same
// instant, 1-2 µs on, a fraction of the period, up to a whole one, around the next window
// boundary (hit exactly or missed by 1 µs), or a long jump.
inline int64_t NextRandomTime(std::mt19937_64& rng, int64_t t, int64_t period) {
  const auto below = [&](int64_t bound) { return static_cast<int64_t>(rng() % bound); };
  switch (below(7)) {
    case 0:
      return t;
    case 1:
      return t + below(3);
    case 2:
    case 3:
      return t + below(period / 4 + 1);
    case 4:
      return t + below(period + 1);
    case 5:
      return std::max(t, t - t % period + period + below(3) - 1);
    default:
      return t + below(3 * period);
  }
}

}  // namespace sluice::core
