// Time going backwards. SystemClock never does; a store can still find a state stamped later than
// its clock (a Redis failover to a host whose clock is behind, a caller's clock behind another's).
// Every algorithm treats such a state as current: nothing it counts is granted again, neither
// while the clock is behind nor when it catches up, and the waits it reports stay exact.
#include "sluice/clock.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/algorithms.h"

namespace sluice::core {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kStart = 1'700'000'000'000'000;

TEST(SystemClock, NeverGoesBackwardsAndFollowsTheWallClock) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([] {
      Time last = SystemClock::Instance().now();
      for (int n = 0; n < 200'000; ++n) {
        const Time t = SystemClock::Instance().now();
        ASSERT_GE(t, last);
        last = t;
      }
    });
  }
  for (auto& t : threads) t.join();
  // Anchored to the wall clock: the same time, give or take what NTP may have stepped since.
  const auto wall = std::chrono::system_clock::now();
  EXPECT_LT(std::chrono::abs(SystemClock::Instance().now() - wall), std::chrono::seconds(1));
}

Limit MakeLimit(Algorithm a, int64_t count, int64_t period_us) {
  auto limit = Limit::Create(a, count, Duration(period_us));
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

// The whole capacity is spent 1 s into a window; then the clock steps back, by less than a
// window, across the boundary, by a whole period and by several, and forward again. Nothing is
// admitted until the first unit comes back on the clock that spent it.
TEST(ClockBehindTheState, NothingSpentIsGrantedAgain) {
  const int64_t period = 10 * kSecond;
  const int64_t spent_at = kStart - kStart % period + kSecond;
  for (Algorithm a : kAllAlgorithms) {
    const Limit limit = MakeLimit(a, 10, period);
    State spent = FreshState(limit, spent_at);
    ASSERT_TRUE(Decide(limit, spent, spent_at, limit.capacity()).allowed);
    for (int64_t back : {int64_t{1}, kSecond / 2, kSecond + 1, period / 2, period, 3 * period}) {
      State state = spent;
      const std::string where = std::string(AlgorithmName(a)) + " back " + std::to_string(back);
      const Decision behind = Decide(limit, state, spent_at - back, 1);
      EXPECT_FALSE(behind.allowed) << where;
      EXPECT_EQ(behind.remaining, 0) << where;
      // The wait counts from the clock that is behind: it is at least the step longer.
      EXPECT_GE(behind.retry_after.count(), back) << where;
      EXPECT_FALSE(Decide(limit, state, spent_at, 1).allowed) << where << ", caught up";
      const int64_t first_back = spent_at + limit.emission_interval().count();
      EXPECT_FALSE(Decide(limit, state, first_back - 1, 1).allowed) << where << ", caught up";
    }
  }
}

// Traffic on a clock that now and then steps back: every denial's retry_after and every
// decision's replenish_after are exact on the clock that is behind, and a denial consumes
// nothing.
TEST(ClockBehindTheState, WaitsStayExact) {
  for (Algorithm a : kAllAlgorithms) {
    for (const auto& [count, period] : {std::pair<int64_t, int64_t>{5, 10 * kSecond}, {3, 7'001}}) {
      const Limit limit = MakeLimit(a, count, period);
      std::mt19937_64 rng(static_cast<uint64_t>(a) * 31 + static_cast<uint64_t>(count));
      State state = FreshState(limit, kStart);
      int64_t t = kStart;
      int denials = 0;
      for (int i = 0; i < 600; ++i) {
        const uint64_t dice = rng() % 10;
        if (dice == 0) {
          t -= static_cast<int64_t>(rng() % (2 * period));  // a step back
        } else if (dice < 4) {
          t += static_cast<int64_t>(rng() % (period / 3));
        }
        const int64_t cost = static_cast<int64_t>(rng() % (count + 1));
        const State before = state;
        const Decision d = Decide(limit, state, t, cost);
        const std::string where = std::string(AlgorithmName(a)) + " step " + std::to_string(i);
        if (!d.allowed) {
          ++denials;
          const int64_t retry = d.retry_after.count();
          ASSERT_GT(retry, 0) << where;
          State early = before, on_time = before, untouched = before;
          ASSERT_FALSE(Decide(limit, early, t + retry - 1, cost).allowed) << where;
          ASSERT_TRUE(Decide(limit, on_time, t + retry, cost).allowed) << where;
          ASSERT_EQ(Decide(limit, state, t, count), Decide(limit, untouched, t, count)) << where;
        }
        if (d.remaining < limit.capacity()) {
          const int64_t wait = d.replenish_after.count();
          ASSERT_GT(wait, 0) << where;
          State early = state, on_time = state;
          ASSERT_FALSE(Decide(limit, early, t + wait - 1, d.remaining + 1).allowed) << where;
          ASSERT_TRUE(Decide(limit, on_time, t + wait, d.remaining + 1).allowed) << where;
        }
      }
      EXPECT_GT(denials, 50) << AlgorithmName(a);
    }
  }
}

}  // namespace
}  // namespace sluice::core
