// Clock: where sluice gets the time. Algorithms never read the wall clock themselves; a store is
// given a Clock and passes "now" to them, so every behaviour can be tested on a ManualClock
// without sleeping. Time is counted in whole microseconds since the Unix epoch, the resolution
// of Redis TIME, so a process and a Redis server compute with the same ticks.
//
// Thread safety: now() may be called from any thread. ManualClock may be set and advanced from
// any thread as well.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice {

using Duration = std::chrono::microseconds;
using Time = std::chrono::time_point<std::chrono::system_clock, Duration>;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time now() const = 0;
};

// The system's real-time clock (CLOCK_REALTIME), like Redis TIME.
class SystemClock final : public Clock {
 public:
  Time now() const override;
  // A process-wide instance.
  static SystemClock& Instance();
};

// A clock that moves only when told to. Starts at `start`.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Time start = Time(Duration(1'700'000'000'000'000))) : us_(ToTicks(start)) {}

  Time now() const override { return Time(Duration(us_.load(std::memory_order_acquire))); }
  void Set(Time t) { us_.store(ToTicks(t), std::memory_order_release); }
  void Advance(Duration d) { us_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  static int64_t ToTicks(Time t) { return t.time_since_epoch().count(); }
  std::atomic<int64_t> us_;
};

}  // namespace sluice
