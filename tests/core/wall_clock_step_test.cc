// SystemClock and MemoryStore (on its default clock) when the system's wall clock steps back an
// hour, as an NTP step does. The step is real for this process: the test runs under libfaketime
// (LD_PRELOAD, see tests/CMakeLists.txt), which moves CLOCK_REALTIME by the offset written to
// $FAKETIME_TIMESTAMP_FILE and leaves CLOCK_MONOTONIC alone.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "sluice/clock.h"
#include "sluice/memory_store.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

// Moves the wall clock of this process `offset` (libfaketime's syntax: "-3600" is an hour back)
// from the real one.
void SetWallClockOffset(const std::string& offset) {
  const char* file = std::getenv("FAKETIME_TIMESTAMP_FILE");
  ASSERT_NE(file, nullptr) << "run under libfaketime (ctest does)";
  std::ofstream(file) << offset << "\n";
}

class WallClockStep : public ::testing::Test {
 protected:
  void SetUp() override { SetWallClockOffset("+0"); }
  void TearDown() override { SetWallClockOffset("+0"); }
};

TEST_F(WallClockStep, SystemClockDoesNotGoBack) {
  const Time before = SystemClock::Instance().now();
  const auto wall_before = std::chrono::system_clock::now();
  SetWallClockOffset("-3600");
  ASSERT_LT(std::chrono::system_clock::now(), wall_before - 59min) << "the wall clock did not step";
  EXPECT_GE(SystemClock::Instance().now(), before);
  EXPECT_LT(SystemClock::Instance().now(), before + 1min);
}

// A fixed window of minutes, spent, then the wall clock an hour back (windows earlier): nothing
// is granted again, nor when the wall clock steps forward again.
TEST_F(WallClockStep, MemoryStoreGrantsNothingAgain) {
  // A period whose current window has over a minute left, so that it holds through the test.
  const int64_t now_us = SystemClock::Instance().now().time_since_epoch().count();
  Duration period{};
  for (const auto minutes : std::array{10min, 11min, 13min, 17min}) {
    const int64_t p = Duration(minutes).count();
    if (p - now_us % p > Duration(1min).count()) {
      period = minutes;
      break;
    }
  }
  ASSERT_GT(period.count(), 0);
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 5, period);
  MemoryStore store;
  const CheckRequest request{.scope = "s", .limit = &limit, .key = "k", .cost = 5};
  ASSERT_TRUE(store.Check(request)->allowed);
  SetWallClockOffset("-3600");
  const Result<Decision> back = store.Check(request);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->allowed) << "an hour back, in another window";
  SetWallClockOffset("+0");
  EXPECT_FALSE(store.Check(request)->allowed) << "back to now";
}

}  // namespace
}  // namespace sluice
