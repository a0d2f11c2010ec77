// MicrosecondGate: lets a thread reuse its last reading of the monotonic clock for as long as the
// CPU's time-stamp counter proves that the reading's microsecond has not ended. sluice counts
// time in whole microseconds; reading the kernel's clock (clock_gettime through the vDSO) costs
// 20-25 ns on a virtual machine, the counter about 10, and a busy thread decides many times in
// one microsecond. SystemClock reads through it.
//
// A reading is reused only when it is exact. The kernel's clock read `ns` after the counter read
// `ticks`; at a later count t on the same CPU the time is therefore at most
// ns + (t - ticks) / rate, and while that is below the next whole microsecond, the microsecond is
// the one read. `rate` is a lower bound on the counter's ticks per ns, measured on one CPU from
// two of the thread's readings at least kCalibrationNs apart: the ticks between the count after
// the first and the count before the second took at most the ns between the two clock readings,
// however long the thread was preempted around them. Such a preemption would make the bound too
// low to be of use, so the pair is kept only if it also bounds the rate from above within 1/64
// (the ticks from the count before the first to the count after the second took at least those
// ns); otherwise the measure starts again from the second. The bound is then lowered by 1/64 for
// rounding. Nothing is reused until the rate is known, on another CPU than the reading's
// (counters of different CPUs need not agree), nor when the counter went back. So a time is never
// later than the kernel's clock, nor earlier than its previous reading on the thread.
//
// MicrosecondGate itself is pure: the caller reads the counter, the CPU and the clock, so that
// tests can drive it with made-up readings. MicrosecondsSince does the reading.
//
// Thread safety: none; one gate per thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice::core {

class MicrosecondGate {
 public:
  // How far apart, in ns, the two readings that measure the counter's rate must be.
  static constexpr int64_t kCalibrationNs = 1'000'000;

  // The whole microseconds of the last recorded reading, if the counter's `ticks` on `cpu` prove
  // that its microsecond has not ended; -1 otherwise.
  int64_t Reuse(uint64_t ticks, int cpu) const {
    return cpu == cpu_ && ticks - ticks_ < span_ ? us_ : -1;
  }

  // True once the counter's rate is known: readings may then be reused.
  bool calibrated() const { return ticks_per_ns_q32_ != 0; }

  // Measures the counter's rate from a reading of the clock, `ns` (>= 0) since its origin, taken
  // between the counter's `ticks_before` and `ticks_after` on `cpu` (-1 when the thread may
  // have moved between CPUs meanwhile), and an earlier one given here.
  void Calibrate(uint64_t ticks_before, int64_t ns, uint64_t ticks_after, int cpu);

  // Records a reading of the clock, `ns` (>= 0) since its origin, taken after the counter's
  // `ticks` on `cpu` (-1 when the thread may have moved between CPUs meanwhile: nothing is then
  // reused from it). Returns its whole microseconds.
  int64_t Record(uint64_t ticks, int64_t ns, int cpu);

 private:
  // The first reading of the calibration, until the rate is known.
  uint64_t first_before_ = 0;
  uint64_t first_after_ = 0;
  int64_t first_ns_ = 0;
  int first_cpu_ = -1;
  uint64_t ticks_per_ns_q32_ = 0;  // the rate's lower bound, 32.32 fixed point; 0: not known yet

  // The last reading, and for how many ticks after it its microsecond is proven to go on.
  uint64_t ticks_ = 0;
  uint64_t span_ = 0;
  int64_t us_ = 0;
  int cpu_ = -1;
};

// True when this machine's counter can gate readings: an x86-64 CPU whose time-stamp counter
// runs at one rate whatever the power state (CPUID's invariant TSC), and a C library that keeps
// the thread's CPU in memory (restartable sequences: sched_getcpu is then a load).
bool CounterUsable();

// The CPU's time-stamp counter; 0 where CounterUsable() is false.
uint64_t ReadCounter();

// The whole microseconds since `origin` on std::chrono::steady_clock, exactly as
// duration_cast<microseconds>(steady_clock::now() - origin), read through `gate` (the calling
// thread's own) when CounterUsable(). `origin` must not be later than the clock and must be the
// same at every call with one gate.
int64_t MicrosecondsSince(std::chrono::steady_clock::time_point origin, MicrosecondGate& gate);

}  // namespace sluice::core
