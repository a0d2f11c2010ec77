// Periods for tests that must see one window of fixed_window or sliding_window throughout: the
// windows are aligned on the Unix epoch, so a period is chosen whose current window is far from
// its end.
#pragma once

#include <chrono>
#include <cstdint>

#include "sluice/limit.h"

namespace sluice::testing {

// A period whose epoch-aligned window does not end within the next ten minutes (of the system
// clock, which Redis TIME also reads).
inline Duration PeriodAwayFromABoundary() {
  using namespace std::chrono_literals;
  const int64_t now =
      std::chrono::duration_cast<Duration>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  Duration period = Limit::kMaxPeriod;
  while (period.count() - now % period.count() < Duration(10min).count()) period -= 24h;
  return period;
}

}  // namespace sluice::testing
