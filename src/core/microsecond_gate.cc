#include "core/microsecond_gate.h"

#if defined(__x86_64__) && __has_include(<sys/rseq.h>)
#include <cpuid.h>
#include <sched.h>
#include <sys/rseq.h>
#include <x86intrin.h>
#define SLUICE_COUNTER_GATE 1
#endif

namespace sluice::core {
namespace {

int64_t MicrosecondsSince(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               origin)
      .count();
}

}  // namespace

int64_t MicrosecondGate::Record(uint64_t ticks, int64_t ns, int cpu) {
  ticks_ = ticks;
  us_ = ns / 1000;
  cpu_ = cpu;
  const auto rest_ns = static_cast<uint64_t>(1000 - ns % 1000);
  span_ = cpu < 0 ? 0 : rest_ns * ticks_per_ns_q32_ >> 32;
  return us_;
}

void MicrosecondGate::Calibrate(uint64_t ticks_before, int64_t ns, uint64_t ticks_after, int cpu) {
  if (cpu < 0) return;
  if (cpu == first_cpu_ && ticks_before > first_after_ && ns - first_ns_ >= kCalibrationNs) {
    const uint64_t at_least = ticks_before - first_after_;
    const uint64_t at_most = ticks_after - first_before_;
    if (at_most - at_least <= at_least / 64) {
      const double ticks_per_ns =
          static_cast<double>(at_least) / static_cast<double>(ns - first_ns_) * (63.0 / 64.0);
      ticks_per_ns_q32_ = static_cast<uint64_t>(ticks_per_ns * 4294967296.0);
      if (ticks_per_ns_q32_ != 0) return;
    }
  }
  if (cpu != first_cpu_ || ticks_before < first_after_ || ns - first_ns_ >= kCalibrationNs) {
    first_before_ = ticks_before;
    first_after_ = ticks_after;
    first_ns_ = ns;
    first_cpu_ = cpu;
  }
}

#ifdef SLUICE_COUNTER_GATE

bool CounterUsable() {
  static const bool usable = [] {
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) == 0) return false;
    constexpr unsigned kInvariantTsc = 1u << 8;
    return (edx & kInvariantTsc) != 0 && __rseq_size > 0;
  }();
  return usable;
}

uint64_t ReadCounter() { return CounterUsable() ? __rdtsc() : 0; }

int64_t MicrosecondsSince(std::chrono::steady_clock::time_point origin, MicrosecondGate& gate) {
  if (!CounterUsable()) return MicrosecondsSince(origin);
  // No fence before this read: it would cost more than the kernel's clock. The count is then as
  // of when the CPU executed the read, which may be a little before the loads that precede it
  // completed (see SystemClock).
  const int cpu = sched_getcpu();
  const uint64_t before = __rdtsc();
  const int before_cpu = sched_getcpu() == cpu ? cpu : -1;
  if (const int64_t reused = gate.Reuse(before, before_cpu); reused >= 0) return reused;
  // The vDSO reads the counter again after a fence, so not before `before`.
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - origin)
                         .count();
  if (!gate.calibrated()) {
    _mm_lfence();  // `after` is read after the clock
    const uint64_t after = __rdtsc();
    gate.Calibrate(before, ns, after, sched_getcpu() == before_cpu ? before_cpu : -1);
  }
  return gate.Record(before, ns, before_cpu);
}

#else

bool CounterUsable() { return false; }

uint64_t ReadCounter() { return 0; }

int64_t MicrosecondsSince(std::chrono::steady_clock::time_point origin, MicrosecondGate&) {
  return MicrosecondsSince(origin);
}

#endif

}  // namespace sluice::core
