#include "sluice/clock.h"

namespace sluice {

Time SystemClock::now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace sluice
