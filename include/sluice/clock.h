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

// The wall-clock time that never goes backwards: the real-time clock (CLOCK_REALTIME, what Redis
// TIME reads) is read once, at the first call in the process, and from then on advanced by the
// monotonic clock (CLOCK_MONOTONIC, std::chrono::steady_clock). An NTP step of the system clock,
// back or forward, is not seen: it cannot re-grant a window that was spent, nor end one early.
// The price is that after such a step this clock keeps the time it had before it (NTP's gradual
// corrections, which both clocks follow, keep them together otherwise), until the process
// restarts. Consecutive calls on one thread never return a smaller time.
//
// A call costs about 10 ns rather than the 20-25 of the monotonic clock on a virtual machine:
// where the CPU has an invariant time-stamp counter, a thread reuses its last reading for as
// long as the counter proves that its microsecond has not ended (src/core/microsecond_gate.h).
// Each call's time is then the one at which its CPU read the counter, which the CPU may do a
// little before the instructions preceding the call are done. So across threads, a call that
// follows another's (through a lock or an atomic) may, at a microsecond's boundary, return the
// microsecond before the one the other call returned. Stores are built for it: a store reads the
// time before it takes the key's lock, so it always meets states stamped later than its time,
// and every algorithm decides on them exactly (tests/core/clock_test.cc).
class SystemClock final : public Clock {
 public:
  Time now() const override;
  // A process-wide instance.
  static SystemClock& Instance();
};

// A clock that moves only when told to. Starts at `start`. It may be set back, to test how a
// store treats a state stamped later than its clock.
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
