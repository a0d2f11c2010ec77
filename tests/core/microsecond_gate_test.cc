// MicrosecondGate on made-up readings (when a reading may be reused, how the counter's rate is
// measured) and MicrosecondsSince on this machine's counter and clock (exact, and reusing).
#include "core/microsecond_gate.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <random>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace sluice::core {
namespace {

constexpr int64_t kMs = 1'000'000;  // in ns
constexpr int kCpu = 3;

// A reading of the clock, `ns`, between the counter's `before` and `after`, recorded as
// MicrosecondsSince does.
int64_t Read(MicrosecondGate& gate, uint64_t before, int64_t ns, uint64_t after, int cpu) {
  if (!gate.calibrated()) gate.Calibrate(before, ns, after, cpu);
  return gate.Record(before, ns, cpu);
}

// A counter of exactly `ticks_per_ns`, read with no delay around the clock: the rate measured
// is ticks_per_ns less 1/64.
MicrosecondGate Calibrated(uint64_t ticks_per_ns) {
  MicrosecondGate gate;
  Read(gate, 0, 0, 0, kCpu);
  Read(gate, ticks_per_ns * kMs, kMs, ticks_per_ns * kMs, kCpu);
  return gate;
}

TEST(MicrosecondGate, ReusesNothingBeforeItKnowsTheCountersRate) {
  MicrosecondGate gate;
  EXPECT_EQ(gate.Reuse(0, -1), -1);  // a gate that has read nothing
  EXPECT_EQ(gate.Reuse(0, 0), -1);
  EXPECT_EQ(Read(gate, 1000, 1'500, 1010, kCpu), 1);
  EXPECT_EQ(gate.Reuse(1001, kCpu), -1);
  // Not yet kCalibrationNs since the first reading.
  EXPECT_EQ(Read(gate, 1000 + 2 * (kMs - 1), kMs - 1 + 1'500, 1000 + 2 * kMs, kCpu), 1001);
  EXPECT_EQ(gate.Reuse(1000 + 2 * kMs, kCpu), -1);
}

TEST(MicrosecondGate, ReusesAReadingWhileTheCounterProvesItsMicrosecondGoesOn) {
  MicrosecondGate gate = Calibrated(2);  // 2 ticks a ns, measured as 2 * 63/64 = 1.96875
  const uint64_t ticks = 10 * kMs;
  ASSERT_EQ(Read(gate, ticks, 7'400, ticks + 5, kCpu), 7);
  // 600 ns are left of microsecond 7: proven for 600 * 1.96875 = 1181.25 ticks.
  EXPECT_EQ(gate.Reuse(ticks, kCpu), 7);
  EXPECT_EQ(gate.Reuse(ticks + 1180, kCpu), 7);
  EXPECT_EQ(gate.Reuse(ticks + 1181, kCpu), -1);
  EXPECT_EQ(gate.Reuse(ticks + 100, kCpu + 1), -1) << "another CPU's counter";
  EXPECT_EQ(gate.Reuse(ticks - 1, kCpu), -1) << "a counter that went back";
  // A reading at the very start of a microsecond is proven for nearly all of it.
  ASSERT_EQ(Read(gate, ticks + 4000, 9'000, ticks + 4001, kCpu), 9);
  EXPECT_EQ(gate.Reuse(ticks + 4000 + 1967, kCpu), 9);
  EXPECT_EQ(gate.Reuse(ticks + 4000 + 1968, kCpu), -1);
}

TEST(MicrosecondGate, ReusesNothingFromAReadingThatMayHaveChangedCpu) {
  MicrosecondGate gate = Calibrated(2);
  ASSERT_EQ(Read(gate, 10 * kMs, 7'000, 10 * kMs + 5, -1), 7);
  EXPECT_EQ(gate.Reuse(10 * kMs + 1, -1), -1);
  EXPECT_EQ(gate.Reuse(10 * kMs + 1, kCpu), -1);
}

// The calibration's two readings are on one CPU; a reading on another starts it again.
TEST(MicrosecondGate, MeasuresTheRateOnOneCpu) {
  MicrosecondGate gate;
  Read(gate, 0, 0, 0, kCpu);
  Read(gate, 5 * kMs, kMs / 2, 5 * kMs, kCpu + 1);  // another CPU: starts again from here
  Read(gate, 6 * kMs, kMs, 6 * kMs, kCpu);          // yet another: again
  Read(gate, 7 * kMs, 2 * kMs - 1, 7 * kMs, kCpu);  // not kCalibrationNs since
  EXPECT_EQ(gate.Reuse(7 * kMs, kCpu), -1);
  Read(gate, 8 * kMs, 2 * kMs, 8 * kMs, kCpu);  // 2 ms of ticks in 1 ms: 2 a ns
  EXPECT_EQ(gate.Reuse(8 * kMs + 1967, kCpu), 2000);
  EXPECT_EQ(gate.Reuse(8 * kMs + 1968, kCpu), -1);
}

// A thread preempted between a clock reading and a count around it would make the rate's lower
// bound far too low: such a pair of readings is not used, and the measure starts again.
TEST(MicrosecondGate, MeasuresTheRateOnlyFromReadingsNotPreempted) {
  MicrosecondGate gate;
  // 2 ticks a ns. The thread was preempted for 0.5 ms between its first clock reading and the
  // count after it: the ticks between the two readings are then known only to be 3M to 4M.
  Read(gate, 0, 0, kMs, kCpu);
  Read(gate, 4 * kMs, 2 * kMs, 4 * kMs, kCpu);
  EXPECT_FALSE(gate.calibrated());
  EXPECT_EQ(gate.Reuse(4 * kMs + 1, kCpu), -1);
  // From the second reading on, 2M ticks in 1 ms.
  Read(gate, 6 * kMs, 3 * kMs, 6 * kMs + 10, kCpu);
  EXPECT_TRUE(gate.calibrated());
  EXPECT_EQ(gate.Reuse(6 * kMs + 1967, kCpu), 3000);  // 1000 ns at 2 * 63/64 ticks a ns
  EXPECT_EQ(gate.Reuse(6 * kMs + 1968, kCpu), -1);
}

// A simulated counter of a random rate, read at random times with random delays around each
// clock reading: every reading reused is the microsecond the clock would have read.
TEST(MicrosecondGate, EveryReadingReusedIsExact) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    const double ticks_per_ns = 0.5 + static_cast<double>(rng() % 4000) / 1000.0;
    const auto ticks_at = [&](int64_t ns) {
      return static_cast<uint64_t>(static_cast<double>(ns) * ticks_per_ns);
    };
    MicrosecondGate gate;
    int64_t ns = static_cast<int64_t>(rng() % kMs);
    int reused = 0;
    for (int i = 0; i < 20'000; ++i) {
      ns += static_cast<int64_t>(rng() % 400);
      const int64_t expected = ns / 1000;
      const int64_t hit = gate.Reuse(ticks_at(ns), kCpu);
      if (hit >= 0) {
        ASSERT_EQ(hit, expected) << "rate " << ticks_per_ns << " at " << ns << " ns";
        ++reused;
        continue;
      }
      // The clock is read some time after the count before, and some time before the count after.
      const int64_t read_at = ns + static_cast<int64_t>(rng() % 50);
      const int64_t after = read_at + static_cast<int64_t>(rng() % 50);
      ASSERT_EQ(Read(gate, ticks_at(ns), read_at, ticks_at(after), kCpu), read_at / 1000);
      ns = after;
    }
    EXPECT_GT(reused, 10'000) << "rate " << ticks_per_ns;
  }
}

int64_t KernelMicrosecondsSince(std::chrono::steady_clock::time_point origin) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - origin)
                      .count();
#if defined(__x86_64__)
  // The next counter read may not run ahead of this clock reading's.
  _mm_lfence();
#endif
  return us;
}

// On this machine's counter (where CounterUsable) or clock: each time lies between the clock's
// readings just before and after it.
TEST(MicrosecondsSince, IsTheMonotonicClocksWholeMicroseconds) {
  const auto origin = std::chrono::steady_clock::now();
  MicrosecondGate gate;
  for (int i = 0; i < 300'000; ++i) {
    const int64_t before = KernelMicrosecondsSince(origin);
    const int64_t us = MicrosecondsSince(origin, gate);
    const int64_t after = KernelMicrosecondsSince(origin);
    ASSERT_LE(before, us) << "call " << i;
    ASSERT_LE(us, after) << "call " << i;
  }
}

// Where the machine's counter can gate readings, the rate becomes known (after kCalibrationNs
// of readings on one CPU, which a loaded machine may take a while to give) and a reading taken
// just after another is reused. Elsewhere, nothing is ever reused.
TEST(MicrosecondsSince, ReusesReadingsWhereTheCounterAllows) {
  using std::chrono::steady_clock;
  const auto origin = steady_clock::now();
  MicrosecondGate gate;
  const auto deadline = origin + std::chrono::seconds(10);
  while (!gate.calibrated() && steady_clock::now() < deadline) MicrosecondsSince(origin, gate);
  int reused = 0;
  int tries = 0;
  for (; tries < 1'000'000 && reused < 10 && steady_clock::now() < deadline; ++tries) {
    const int cpu = sched_getcpu();
    const int64_t us = MicrosecondsSince(origin, gate);
    reused += gate.Reuse(ReadCounter(), cpu) == us;
  }
  if (CounterUsable()) {
    EXPECT_TRUE(gate.calibrated());
    EXPECT_EQ(reused, 10) << "in " << tries << " tries";
  } else {
    EXPECT_FALSE(gate.calibrated());
    EXPECT_EQ(reused, 0);
  }
}

}  // namespace
}  // namespace sluice::core
