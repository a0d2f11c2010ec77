// A rule reloaded with other parameters (limit, period, burst) reads the states its keys hold:
// it never admits more than the new parameters allow given what the state remembers. Checked
// on random traces whose parameters change once, against what each algorithm must still count
// (docs/algorithms.md, "Parameter changes"), and on the cases that used to go wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/algorithms.h"
#include "random_times.h"

namespace sluice::core {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kStart = 1'700'000'000'000'000;

Limit MakeLimit(Algorithm a, int64_t count, int64_t period_us,
                std::optional<int64_t> burst = std::nullopt) {
  auto limit = Limit::Create(a, count, Duration(period_us), burst);
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

std::string Describe(const Limit& l) {
  return std::to_string(l.count()) + "/" + std::to_string(l.period().count()) + "us burst " +
         std::to_string(l.capacity());
}

// Limits of one algorithm to change between: counts, periods and bursts far apart and not
// multiples of one another.
std::vector<Limit> LimitsOf(Algorithm a) {
  std::vector<Limit> limits;
  for (int64_t count : {1, 3, 10, 40}) {
    for (int64_t period : {1'000, 3'333, 10'000, 70'001}) {
      if (period < count) continue;
      limits.push_back(MakeLimit(a, count, period));
      if (IsMeter(a)) {
        for (int64_t burst : {1, 7, 30}) limits.push_back(MakeLimit(a, count, period, burst));
      }
    }
  }
  return limits;
}

struct Admission {
  int64_t at;
  int64_t units;
};

// One change: `before` decides the first half of the trace, `after` the rest.
struct Change {
  Change(const Limit& b, const Limit& a) : before(b), after(a) {}
  Limit before, after;
  std::vector<Admission> admitted;       // all, in time order
  int64_t changed_at = 0;                // the first decision under `after`
  int64_t last_before = 0;               // the last decision under `before`
  std::optional<int64_t> latest_before;  // the latest admission under `before`
};

// Drives a state through random traffic, at times around the windows of the limit in force.
// `judge(t, cost)` is called before each decision under `after`, and must return false when an
// admission there would break the property.
template <typename Judge>
void Drive(Change& run, uint64_t seed, Judge judge) {
  std::mt19937_64 rng(seed);
  const auto below = [&](int64_t bound) { return static_cast<int64_t>(rng() % bound); };
  State state = FreshState(run.before, kStart);
  int64_t t = kStart + below(run.before.period().count());
  for (int i = 0; i < 400; ++i) {
    const Limit& limit = i < 200 ? run.before : run.after;
    t = NextRandomTime(rng, t, limit.period().count());
    const int64_t cost = below(6) == 0 ? below(limit.capacity() + 1) : 1;
    if (i == 200) run.changed_at = t;
    const Decision d = Decide(limit, state, t, cost);
    if (i < 200) run.last_before = t;
    if (d.allowed && cost > 0) {
      if (i >= 200) {
        ASSERT_TRUE(judge(t, cost)) << "seed " << seed << " " << AlgorithmName(limit.algorithm())
                                    << " " << Describe(run.before) << " -> " << Describe(run.after)
                                    << ": admitted " << cost << " at t+" << t - run.changed_at;
      } else {
        run.latest_before = t;
      }
      run.admitted.push_back({t, cost});
    }
  }
}

// The units admitted at times in [from, to).
int64_t UnitsIn(const std::vector<Admission>& admitted, int64_t from, int64_t to) {
  int64_t units = 0;
  for (const Admission& a : admitted) units += a.at >= from && a.at < to ? a.units : 0;
  return units;
}

template <typename Check>
void ForEveryChange(Algorithm algorithm, Check check) {
  const std::vector<Limit> limits = LimitsOf(algorithm);
  std::mt19937_64 pick(static_cast<uint64_t>(algorithm) + 1);
  for (int change = 0; change < 150; ++change) {
    const Limit& before = limits[pick() % limits.size()];
    Change run(before, limits[pick() % limits.size()]);
    check(run, 1000 + static_cast<uint64_t>(change));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A meter holds at most its capacity, and gains one unit per emission interval: from the first
// decision under the new limit, at most C' + ⌈Δ/T'⌉ units in the next Δ.
TEST(ParameterChange, MetersNeverHoldMoreThanTheNewBurst) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    ForEveryChange(a, [](Change& run, uint64_t seed) {
      int64_t since = 0;
      const int64_t capacity = run.after.capacity();
      const int64_t interval = run.after.emission_interval().count();
      Drive(run, seed, [&](int64_t t, int64_t cost) {
        since += cost;
        return since <= capacity + (t - run.changed_at + interval - 1) / interval;
      });
    });
  }
}

// fixed_window counts the window of its latest admission: the units of that (old) window that
// fall in the new window containing the change still count there.
TEST(ParameterChange, FixedWindowCountsTheOldWindowsUnitsInTheNewOne) {
  ForEveryChange(Algorithm::kFixedWindow, [](Change& run, uint64_t seed) {
    Drive(run, seed, [&](int64_t t, int64_t cost) {
      const int64_t period = run.after.period().count();
      const int64_t start = t - t % period;
      int64_t remembered = 0;
      if (run.latest_before) {
        const int64_t old_period = run.before.period().count();
        const int64_t old_start = *run.latest_before - *run.latest_before % old_period;
        remembered = UnitsIn(run.admitted, std::max(start, old_start), run.changed_at);
      }
      const int64_t since = UnitsIn(run.admitted, std::max(start, run.changed_at), t + 1) + cost;
      return since + remembered <= std::max(run.after.count(), remembered);
    });
  });
}

// sliding_window remembers its previous and current windows: every unit admitted since the start
// of the previous one weighs at least what the new period gives it, by the time it came.
TEST(ParameterChange, SlidingWindowWeighsEveryRememberedUnitByTheNewPeriod) {
  ForEveryChange(Algorithm::kSlidingWindow, [](Change& run, uint64_t seed) {
    Drive(run, seed, [&](int64_t t, int64_t cost) {
      int64_t remembered_from = run.changed_at;
      if (run.latest_before) {
        const int64_t old_period = run.before.period().count();
        remembered_from = *run.latest_before - *run.latest_before % old_period - old_period;
      }
      const int64_t period = run.after.period().count();
      const int64_t start = t - t % period;
      const auto units = [&](int64_t from, int64_t to) {
        return static_cast<double>(UnitsIn(run.admitted, std::max(from, remembered_from), to));
      };
      const double weight = static_cast<double>(period - (t - start)) / static_cast<double>(period);
      const double estimate = units(start - period, start) * weight + units(start, t + 1);
      // A hair of slack: the algorithm sums the same units grouped otherwise, in doubles.
      return estimate + static_cast<double>(cost) <= static_cast<double>(run.after.count()) + 1e-9;
    });
  });
}

// sliding_log holds every admission since the last decision under the old period reached back:
// those in the new period count against the new limit.
TEST(ParameterChange, SlidingLogCountsEveryLoggedUnitInTheNewPeriod) {
  ForEveryChange(Algorithm::kSlidingLog, [](Change& run, uint64_t seed) {
    Drive(run, seed, [&](int64_t t, int64_t cost) {
      const int64_t logged_from = run.last_before - run.before.period().count() + 1;
      const int64_t from = std::max(t - run.after.period().count() + 1, logged_from);
      return UnitsIn(run.admitted, from, t + 1) + cost <= run.after.count();
    });
  });
}

// The cases that went wrong: a token bucket kept tokens above a lowered burst (999 admitted at
// once on a burst of 10); the window algorithms reset a count when a new period's window started
// elsewhere, granting the new limit again in the window the count was spent in.
TEST(ParameterChange, ALoweredBurstIsTheMostAdmittedAtOnce) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit wide = MakeLimit(a, 1000, 3600 * kSecond, 1000);
    const Limit narrow = MakeLimit(a, 1000, 3600 * kSecond, 10);
    State state = FreshState(wide, kStart);
    ASSERT_TRUE(Decide(wide, state, kStart, 1).allowed);
    int admitted = 0;
    for (int i = 0; i < 1000; ++i) {
      const Decision d = Decide(narrow, state, kStart, 1);
      EXPECT_LE(d.remaining, 10) << AlgorithmName(a);
      admitted += d.allowed;
    }
    EXPECT_LE(admitted, 10) << AlgorithmName(a);
    EXPECT_GE(admitted, 9) << AlgorithmName(a);
  }
}

TEST(ParameterChange, AShorterPeriodKeepsTheCountOfItsWindow) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow}) {
    const int64_t hour = 3600 * kSecond, minute = 60 * kSecond;
    const Limit hourly = MakeLimit(a, 10, hour);
    const Limit per_minute = MakeLimit(a, 10, minute);
    // 10 units 5 s into a minute that is half an hour into the hour, then 10/min from 10 s.
    const int64_t minute_start = kStart - kStart % hour + 30 * minute;
    State state = FreshState(hourly, minute_start);
    ASSERT_TRUE(Decide(hourly, state, minute_start + 5 * kSecond, 10).allowed);
    const Decision d = Decide(per_minute, state, minute_start + 10 * kSecond, 1);
    EXPECT_FALSE(d.allowed) << AlgorithmName(a) << ": the minute already holds 10";
    EXPECT_EQ(d.remaining, 0) << AlgorithmName(a);
  }
}

TEST(ParameterChange, ALoweredLimitAdmitsNothingUntilTheCountFallsBelowIt) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingLog, Algorithm::kSlidingWindow}) {
    const Limit ten = MakeLimit(a, 10, 10 * kSecond);
    const Limit four = MakeLimit(a, 4, 10 * kSecond);
    const int64_t t = kStart - kStart % (10 * kSecond);
    State state = FreshState(ten, t);
    ASSERT_TRUE(Decide(ten, state, t, 8).allowed);
    const Decision d = Decide(four, state, t + 1, 1);
    EXPECT_FALSE(d.allowed) << AlgorithmName(a);
    EXPECT_EQ(d.remaining, 0) << AlgorithmName(a);
    EXPECT_GT(d.retry_after.count(), 0) << AlgorithmName(a);
    // Exact: admitted at retry_after, not a microsecond before.
    State early = state, on_time = state;
    EXPECT_FALSE(Decide(four, early, t + d.retry_after.count(), 1).allowed) << AlgorithmName(a);
    EXPECT_TRUE(Decide(four, on_time, t + 1 + d.retry_after.count(), 1).allowed)
        << AlgorithmName(a);
  }
}

}  // namespace
}  // namespace sluice::core
