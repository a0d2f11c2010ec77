#include "sluice/clock.h"

#include "core/microsecond_gate.h"

namespace sluice {
namespace {

// The wall-clock time and the monotonic clock's reading at one instant: the first call.
struct Anchor {
  Time wall;
  std::chrono::steady_clock::time_point steady;
};

const Anchor& ProcessAnchor() {
  static const Anchor anchor{
      std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()),
      std::chrono::steady_clock::now()};
  return anchor;
}

}  // namespace

Time SystemClock::now() const {
  const Anchor& anchor = ProcessAnchor();
  thread_local constinit core::MicrosecondGate gate;
  return anchor.wall + Duration(core::MicrosecondsSince(anchor.steady, gate));
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace sluice
