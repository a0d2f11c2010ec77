// The six algorithms against reference models written independently here, on randomized traces,
// plus the properties every algorithm promises: exact retry_after, tight reset_after, denials
// consume nothing; and the burst/error properties docs/algorithms.md states.
#include "core/algorithms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "random_times.h"

namespace sluice::core {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kStart = 1'700'000'000'000'000;  // a realistic epoch time, in µs

struct Params {
  Algorithm algorithm;
  int64_t count;
  int64_t period_us;
  std::optional<int64_t> burst;
};

Limit MakeLimit(const Params& p) {
  auto limit = Limit::Create(p.algorithm, p.count, Duration(p.period_us), p.burst);
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

Limit MakeLimit(Algorithm a, int64_t count, int64_t period_us,
                std::optional<int64_t> burst = std::nullopt) {
  return MakeLimit(Params{a, count, period_us, burst});
}

// --- Reference models ----------------------------------------------------------------------------
// Textbook definitions computed the slow, obvious way from the raw parameters: no core code, not
// even Limit's derived values. Time only moves forward in the traces they are fed.

struct Expected {
  bool allowed;
  int64_t remaining;
  int64_t retry_after;
  int64_t reset_after;
  int64_t delay = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual Expected Decide(int64_t now, int64_t cost) = 0;
};

// Admitted units counted per epoch-aligned window.
class FixedWindowModel : public Model {
 public:
  explicit FixedWindowModel(const Params& p) : count_(p.count), period_(p.period_us) {}
  Expected Decide(int64_t now, int64_t cost) override {
    const int64_t window = now / period_;
    const int64_t window_end = (window + 1) * period_;
    int64_t& used = used_[window];
    const bool allowed = used + std::max<int64_t>(cost, 1) <= count_;
    if (allowed) used += cost;
    return {allowed, count_ - used, allowed ? 0 : window_end - now,
            used > 0 ? window_end - now : 0};
  }

 private:
  int64_t count_, period_;
  std::map<int64_t, int64_t> used_;
};

// One log entry per admitted unit. A unit admitted at `at` counts at t iff t - P < at <= t.
class SlidingLogModel : public Model {
 public:
  explicit SlidingLogModel(const Params& p) : count_(p.count), period_(p.period_us) {}
  Expected Decide(int64_t now, int64_t cost) override {
    std::erase_if(log_, [&](int64_t at) { return at <= now - period_; });
    const int64_t units = std::max<int64_t>(cost, 1);
    const bool allowed = UsedAt(now) + units <= count_;
    int64_t retry_after = 0;
    if (allowed) {
      log_.insert(log_.end(), cost, now);
    } else {
      // The count only drops when a unit expires, at at + P: try each such instant in turn.
      retry_after = -1;
      for (int64_t at : log_) {
        if (UsedAt(at + period_) + units <= count_) {
          retry_after = at + period_ - now;
          break;
        }
      }
      EXPECT_GT(retry_after, 0) << "model found no retry time";
    }
    const int64_t reset_after = log_.empty() ? 0 : log_.back() + period_ - now;
    return {allowed, count_ - UsedAt(now), retry_after, reset_after};
  }

 private:
  int64_t UsedAt(int64_t t) const {
    return std::count_if(log_.begin(), log_.end(),
                         [&](int64_t at) { return at > t - period_ && at <= t; });
  }
  int64_t count_, period_;
  std::vector<int64_t> log_;  // non-decreasing
};

// Counts per epoch-aligned window; the documented estimate weighs the previous window by the
// fraction of it still inside the sliding period:
//   estimate(t) = n[w-1] × ((P − e) / P) + n[w],   w = ⌊t/P⌋, e = t − wP, in doubles.
// retry_after is solved for in closed form, then corrected to the exact microsecond the double
// comparison first admits.
class SlidingWindowModel : public Model {
 public:
  explicit SlidingWindowModel(const Params& p) : count_(p.count), period_(p.period_us) {}
  Expected Decide(int64_t now, int64_t cost) override {
    const int64_t units = std::max<int64_t>(cost, 1);
    const int64_t window = now / period_;
    const bool allowed = Admits(now, units);
    int64_t retry_after = 0;
    if (allowed) {
      n_[window] += cost;
    } else {
      retry_after = -1;
      for (int64_t w = window; w <= window + 2 && retry_after < 0; ++w) {
        const int64_t at = FirstAdmitting(w, std::max(now + 1, w * period_), units);
        if (at >= 0) retry_after = at - now;
      }
      EXPECT_GT(retry_after, 0) << "model found no retry time";
    }
    const double left = static_cast<double>(count_) - Estimate(now);
    const int64_t remaining = std::max<int64_t>(0, static_cast<int64_t>(std::floor(left)));
    const int64_t reset_after = N(window) > 0       ? (window + 2) * period_ - now
                                : N(window - 1) > 0 ? (window + 1) * period_ - now
                                                    : 0;
    return {allowed, remaining, retry_after, reset_after};
  }

 private:
  int64_t N(int64_t w) const {
    auto it = n_.find(w);
    return it == n_.end() ? 0 : it->second;
  }
  double Estimate(int64_t t) const {
    const int64_t w = t / period_;
    const int64_t e = t - w * period_;
    const double weight = static_cast<double>(period_ - e) / static_cast<double>(period_);
    return static_cast<double>(N(w - 1)) * weight + static_cast<double>(N(w));
  }
  bool Admits(int64_t t, int64_t units) const {
    return Estimate(t) + static_cast<double>(units) <= static_cast<double>(count_);
  }
  // The first t in [from, end of window w) at which `units` are admitted, or -1.
  int64_t FirstAdmitting(int64_t w, int64_t from, int64_t units) const {
    const int64_t start = w * period_, last = start + period_ - 1;
    const int64_t prev = N(w - 1), free = count_ - N(w) - units;
    if (free < 0) return -1;
    // prev × (P − e)/P ≤ free  ⇔  e ≥ P − free × P / prev, in exact arithmetic.
    int64_t t = from;
    if (prev > free) {
      const __int128 slack = static_cast<__int128>(free) * period_ / prev;
      t = std::max(from, start + period_ - static_cast<int64_t>(slack));
    }
    // Double rounding can move the exact answer by a hair: settle it on the comparison itself.
    for (int i = 0; i < 4 && t > from && Admits(t - 1, units); ++i) --t;
    for (int i = 0; i < 4 && t <= last && !Admits(t, units); ++i) ++t;
    if (t > last) return -1;
    EXPECT_TRUE(Admits(t, units) && (t == from || !Admits(t - 1, units)))
        << "closed form off by more than 4µs at " << t;
    return t;
  }
  int64_t count_, period_;
  std::map<int64_t, int64_t> n_;
};

// token_bucket, leaky_bucket and gcra as the one meter they all are, modelled as a queue: each
// admitted unit is a cell that departs T = ⌈P/L⌉ µs after the previous departure (or after its
// own arrival if the queue was empty). The level at t is the number of cells not yet departed
// (departure > t); a request fits if level + units ≤ capacity.
class MeterModel : public Model {
 public:
  explicit MeterModel(const Params& p)
      : capacity_(p.burst.value_or(p.count)), interval_((p.period_us + p.count - 1) / p.count) {}
  Expected Decide(int64_t now, int64_t cost) override { return Reserve(now, cost, 0); }

  // A reservation: a request that does not fit now but would after a wait <= max_delay queues
  // its cells behind the others (the queue then holds more than the capacity).
  Expected Reserve(int64_t now, int64_t cost, int64_t max_delay) {
    std::erase_if(departures_, [&](int64_t d) { return d <= now; });
    const int64_t units = std::max<int64_t>(cost, 1);
    const int64_t level = static_cast<int64_t>(departures_.size());
    // Until enough of the oldest cells have departed.
    const int64_t wait =
        level + units <= capacity_ ? 0 : departures_[level - (capacity_ - units) - 1] - now;
    const bool allowed = wait == 0 || (cost > 0 && wait <= max_delay);
    int64_t retry_after = 0;
    if (allowed) {
      for (int64_t i = 0; i < cost; ++i) {
        departures_.push_back(std::max(now, departures_.empty() ? now : departures_.back()) +
                              interval_);
      }
    } else {
      retry_after = cost > 0 ? wait - max_delay : wait;
    }
    const int64_t reset_after = departures_.empty() ? 0 : departures_.back() - now;
    return {allowed, std::max<int64_t>(0, capacity_ - static_cast<int64_t>(departures_.size())),
            retry_after, reset_after, allowed ? wait : 0};
  }

 private:
  int64_t capacity_, interval_;
  std::vector<int64_t> departures_;  // increasing
};

std::unique_ptr<Model> ModelFor(const Params& p) {
  switch (p.algorithm) {
    case Algorithm::kFixedWindow:
      return std::make_unique<FixedWindowModel>(p);
    case Algorithm::kSlidingLog:
      return std::make_unique<SlidingLogModel>(p);
    case Algorithm::kSlidingWindow:
      return std::make_unique<SlidingWindowModel>(p);
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
      return std::make_unique<MeterModel>(p);
  }
  return nullptr;
}

// --- Randomized traces ---------------------------------------------------------------------------

using Trace = std::vector<std::pair<int64_t, int64_t>>;  // (now, cost), now non-decreasing

// Bursts at one instant, 1-2µs steps, window boundaries hit exactly and missed by 1µs, pauses
// and long jumps; costs mostly 0-2, sometimes anything up to the capacity.
Trace RandomTrace(const Limit& limit, uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  const auto below = [&](int64_t bound) { return static_cast<int64_t>(rng() % bound); };
  const int64_t period = limit.period().count();
  Trace trace;
  int64_t t = kStart + below(period);
  for (int i = 0; i < n; ++i) {
    t = NextRandomTime(rng, t, period);
    const int64_t cost =
        below(8) == 0 ? below(limit.capacity() + 1) : std::min(below(3), limit.capacity());
    trace.emplace_back(t, cost);
  }
  return trace;
}

class AlgorithmTrace : public ::testing::TestWithParam<Params> {};

TEST_P(AlgorithmTrace, MatchesReferenceModel) {
  const Limit limit = MakeLimit(GetParam());
  int allowed = 0, denied = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto model = ModelFor(GetParam());
    State state = FreshState(limit, kStart);
    for (const auto& [now, cost] : RandomTrace(limit, seed, 300)) {
      const Decision got = Decide(limit, state, now, cost);
      const Expected want = model->Decide(now, cost);
      const auto where = [&, now = now, cost = cost] {  // clang 14 cannot capture bindings
        return "seed " + std::to_string(seed) + " t " + std::to_string(now) + " cost " +
               std::to_string(cost);
      };
      ASSERT_EQ(got.allowed, want.allowed) << where();
      ASSERT_EQ(got.remaining, want.remaining) << where();
      ASSERT_EQ(got.retry_after.count(), want.retry_after) << where();
      ASSERT_EQ(got.reset_after.count(), want.reset_after) << where();
      ASSERT_EQ(got.limit, GetParam().count);
      ++(got.allowed ? allowed : denied);
    }
  }
  // The traces exercise both outcomes substantially.
  EXPECT_GT(allowed, 200);
  EXPECT_GT(denied, 200);
}

// After any denial at t with retry_after r, with no other traffic, the same request is denied at
// t + r − 1µs and admitted at t + r.
TEST_P(AlgorithmTrace, RetryAfterIsExact) {
  const Limit limit = MakeLimit(GetParam());
  int denials = 0;
  for (uint64_t seed = 100; seed < 120; ++seed) {
    State state = FreshState(limit, kStart);
    for (const auto& [now, cost] : RandomTrace(limit, seed, 200)) {
      const State before = state;
      const Decision d = Decide(limit, state, now, cost);
      if (d.allowed) continue;
      ++denials;
      const int64_t retry = d.retry_after.count();
      ASSERT_GT(retry, 0);
      State early = before, on_time = before;
      ASSERT_FALSE(Decide(limit, early, now + retry - 1, cost).allowed)
          << "seed " << seed << " t " << now << " cost " << cost << " retry " << retry;
      ASSERT_TRUE(Decide(limit, on_time, now + retry, cost).allowed)
          << "seed " << seed << " t " << now << " cost " << cost << " retry " << retry;
    }
  }
  EXPECT_GT(denials, 100);
}

// Before each request of the trace, one copy of the state alone is sent an extra request; when it
// is denied the copy is kept. Both copies must go on deciding identically.
TEST_P(AlgorithmTrace, DenialConsumesNothing) {
  const Limit limit = MakeLimit(GetParam());
  std::mt19937_64 rng(7);
  int denials = 0;
  for (uint64_t seed = 200; seed < 210; ++seed) {
    State with = FreshState(limit, kStart), without = FreshState(limit, kStart);
    for (const auto& [now, cost] : RandomTrace(limit, seed, 200)) {
      const State undo = with;
      const int64_t extra = 1 + static_cast<int64_t>(rng() % limit.capacity());
      if (Decide(limit, with, now, extra).allowed) {
        with = undo;
      } else {
        ++denials;
      }
      ASSERT_EQ(Decide(limit, with, now, cost), Decide(limit, without, now, cost))
          << "seed " << seed << " t " << now;
    }
  }
  EXPECT_GT(denials, 300);
}

// reset_after is exactly when the state becomes equivalent to a fresh one: a full-capacity
// request is then decided as on a fresh state, and 1µs earlier it is not.
TEST_P(AlgorithmTrace, ResetAfterIsWhenTheStateIsFreshAgain) {
  const Limit limit = MakeLimit(GetParam());
  const int64_t all = limit.capacity();
  for (uint64_t seed = 300; seed < 310; ++seed) {
    State state = FreshState(limit, kStart);
    for (const auto& [now, cost] : RandomTrace(limit, seed, 100)) {
      const int64_t reset = Decide(limit, state, now, cost).reset_after.count();
      const int64_t at = now + reset;
      State later = state, fresh = FreshState(limit, at);
      ASSERT_EQ(Decide(limit, later, at, all), Decide(limit, fresh, at, all))
          << "seed " << seed << " t " << now << " reset_after " << reset;
      if (reset == 0) continue;
      State earlier = state, fresh_earlier = FreshState(limit, at - 1);
      ASSERT_NE(Decide(limit, earlier, at - 1, all), Decide(limit, fresh_earlier, at - 1, all))
          << "seed " << seed << " t " << now << " reset_after " << reset;
    }
  }
}

// replenish_after is exact: with no other traffic, a request for remaining + 1 units is admitted
// at now + replenish_after and denied 1µs earlier; it is zero exactly when nothing is spent.
void ExpectReplenishAfterIsExact(const Limit& limit, const State& after, int64_t now,
                                 const Decision& d, const std::string& where) {
  const int64_t wait = d.replenish_after.count();
  if (d.remaining >= limit.capacity()) {
    EXPECT_EQ(wait, 0) << where;
    return;
  }
  ASSERT_GT(wait, 0) << where;
  State early = after, on_time = after;
  EXPECT_FALSE(Decide(limit, early, now + wait - 1, d.remaining + 1).allowed)
      << where << " replenish_after " << wait;
  EXPECT_TRUE(Decide(limit, on_time, now + wait, d.remaining + 1).allowed)
      << where << " replenish_after " << wait;
}

TEST_P(AlgorithmTrace, ReplenishAfterIsWhenOneMoreUnitFits) {
  const Limit limit = MakeLimit(GetParam());
  int spent = 0;
  for (uint64_t seed = 400; seed < 410; ++seed) {
    State state = FreshState(limit, kStart);
    for (const auto& [now, cost] : RandomTrace(limit, seed, 200)) {
      const Decision d = Decide(limit, state, now, cost);
      ExpectReplenishAfterIsExact(limit, state, now, d,
                                  "seed " + std::to_string(seed) + " t " + std::to_string(now));
      if (HasFatalFailure()) return;
      spent += d.remaining < limit.capacity();
    }
  }
  EXPECT_GT(spent, 500);
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, AlgorithmTrace,
    ::testing::Values(Params{Algorithm::kFixedWindow, 10, 10 * kSecond, std::nullopt},
                      Params{Algorithm::kFixedWindow, 3, 1'000, std::nullopt},
                      Params{Algorithm::kSlidingLog, 10, 10 * kSecond, std::nullopt},
                      Params{Algorithm::kSlidingLog, 4, 7'001, std::nullopt},
                      Params{Algorithm::kSlidingWindow, 10, 10 * kSecond, std::nullopt},
                      Params{Algorithm::kSlidingWindow, 7, 3'333, std::nullopt},
                      Params{Algorithm::kTokenBucket, 10, 10 * kSecond, std::nullopt},
                      Params{Algorithm::kTokenBucket, 3, 10 * kSecond, 7},
                      Params{Algorithm::kLeakyBucket, 10, 10 * kSecond, std::nullopt},
                      Params{Algorithm::kLeakyBucket, 7, 1'000, 2},
                      Params{Algorithm::kGcra, 10, 10 * kSecond, std::nullopt},
                      Params{Algorithm::kGcra, 3, 10 * kSecond, 5}),
    [](const auto& info) {
      const Params& p = info.param;
      return std::string(AlgorithmName(p.algorithm)) + "_" + std::to_string(p.count) + "_per_" +
             std::to_string(p.period_us) + "us" +
             (p.burst ? "_burst_" + std::to_string(*p.burst) : "");
    });

// --- Properties of particular algorithms ---------------------------------------------------------

// The most units admitted in any half-open interval [t, t + period).
int64_t MaxInAnyPeriod(const Trace& admitted, int64_t period) {
  int64_t best = 0;
  for (size_t i = 0; i < admitted.size(); ++i) {
    int64_t sum = 0;
    for (size_t j = i; j < admitted.size() && admitted[j].first < admitted[i].first + period; ++j) {
      sum += admitted[j].second;
    }
    best = std::max(best, sum);
  }
  return best;
}

TEST(FixedWindow, AdmitsTwiceTheLimitAcrossABoundary) {
  const int64_t period = 10 * kSecond;
  const Limit limit = MakeLimit(Algorithm::kFixedWindow, 5, period);
  const int64_t boundary = kStart - kStart % period + period;
  FixedWindowState s;
  int before = 0, after = 0;
  for (int i = 0; i < 10; ++i) before += Decide(limit, s, boundary - 1, 1).allowed;
  for (int i = 0; i < 10; ++i) after += Decide(limit, s, boundary, 1).allowed;
  EXPECT_EQ(before, 5);
  EXPECT_EQ(after, 5);  // 2 × limit within 2µs
}

TEST(SlidingLog, NeverMoreThanTheLimitInAnyPeriod) {
  for (const auto& [count, period] : {std::pair<int64_t, int64_t>{5, 10 * kSecond}, {20, 1'000}}) {
    const Limit limit = MakeLimit(Algorithm::kSlidingLog, count, period);
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      SlidingLogState s;
      Trace admitted;
      for (const auto& [now, cost] : RandomTrace(limit, seed, 400)) {
        if (cost > 0 && Decide(limit, s, now, cost).allowed) admitted.emplace_back(now, cost);
      }
      ASSERT_LE(MaxInAnyPeriod(admitted, period), count) << "seed " << seed;
    }
  }
}

// docs/algorithms.md derives that sliding_window admits at most 2L − ⌈2L/P⌉ units in any
// period of P µs (2L − 1 whenever L ≤ P/2), and that the bound is reached by L units in the last
// microsecond of one window followed by as many as the decaying estimate lets through.
int64_t SlidingWindowBound(int64_t count, int64_t period) {
  return 2 * count - (2 * count + period - 1) / period;
}

TEST(SlidingWindow, WorstCaseReachesTheDocumentedBound) {
  for (const auto& [count, period] :
       {std::pair<int64_t, int64_t>{10, 10 * kSecond}, {7, 3'333}, {700, 1'000}}) {
    const Limit limit = MakeLimit(Algorithm::kSlidingWindow, count, period);
    const int64_t boundary = kStart - kStart % period + period;
    SlidingWindowState s;
    Trace admitted;
    ASSERT_TRUE(Decide(limit, s, boundary - 1, count).allowed);
    admitted.emplace_back(boundary - 1, count);
    // Take every unit as soon as it is admitted, up to the end of [boundary − 1, + period).
    for (int64_t t = boundary; t < boundary + period - 1;) {
      const Decision d = Decide(limit, s, t, 1);
      if (d.allowed) {
        admitted.emplace_back(t, 1);
      } else {
        t += d.retry_after.count();
      }
    }
    EXPECT_EQ(MaxInAnyPeriod(admitted, period), SlidingWindowBound(count, period))
        << count << " per " << period << "us";
  }
}

TEST(SlidingWindow, RandomTrafficStaysWithinTheDocumentedBound) {
  for (const auto& [count, period] :
       {std::pair<int64_t, int64_t>{10, 10 * kSecond}, {7, 3'333}, {700, 1'000}}) {
    const Limit limit = MakeLimit(Algorithm::kSlidingWindow, count, period);
    int64_t worst = 0;
    for (uint64_t seed = 1; seed <= 30; ++seed) {
      std::mt19937_64 rng(seed);
      SlidingWindowState s;
      Trace admitted;
      int64_t t = kStart - kStart % period;
      for (int i = 0; i < 400; ++i) {
        // Mostly small steps, crowded near the end of windows where the estimate is weakest.
        const bool late = t % period > period * 9 / 10;
        t += static_cast<int64_t>(rng() % (late ? period / 50 + 1 : period / 5 + 1));
        const int64_t cost = 1 + static_cast<int64_t>(rng() % (count / 4 + 1));
        if (Decide(limit, s, t, cost).allowed) admitted.emplace_back(t, cost);
      }
      worst = std::max(worst, MaxInAnyPeriod(admitted, period));
    }
    EXPECT_LE(worst, SlidingWindowBound(count, period)) << count << " per " << period << "us";
    EXPECT_GT(worst, count) << "the approximation should show some overshoot";
  }
}

TEST(Gcra, SpacesRequestsOneEmissionIntervalApartAfterTheBurst) {
  const Limit limit = MakeLimit(Algorithm::kGcra, 10, kSecond, 3);  // T = 100 ms
  GcraState s{kStart};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Decide(limit, s, kStart, 1).allowed);
  Decision d = Decide(limit, s, kStart, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, std::chrono::milliseconds(100));
  EXPECT_EQ(d.reset_after, std::chrono::milliseconds(300));
  EXPECT_TRUE(Decide(limit, s, kStart + 100'000, 1).allowed);
  EXPECT_FALSE(Decide(limit, s, kStart + 100'000, 1).allowed);
}

TEST(TokenBucket, RefillsOneTokenPerEmissionInterval) {
  const Limit limit = MakeLimit(Algorithm::kTokenBucket, 4, 2 * kSecond);  // T = 500 ms
  State state = FreshState(limit, kStart);
  Decision d = Decide(limit, state, kStart, 4);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, std::chrono::seconds(2));
  d = Decide(limit, state, kStart + 1'200'000, 3);  // two tokens earned, 200 ms into the third
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.retry_after, std::chrono::milliseconds(300));
  EXPECT_EQ(d.reset_after, std::chrono::milliseconds(800));
}

TEST(LeakyBucket, LevelDrainsAtTheRate) {
  const Limit limit = MakeLimit(Algorithm::kLeakyBucket, 2, kSecond, 4);  // one unit per 500 ms
  State state = FreshState(limit, kStart);
  EXPECT_TRUE(Decide(limit, state, kStart, 4).allowed);
  Decision d = Decide(limit, state, kStart + 600'000, 2);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.retry_after, std::chrono::milliseconds(400));
  EXPECT_EQ(d.reset_after, std::chrono::milliseconds(1400));
}

// An emission interval that does not divide the period is rounded up, never down.
TEST(Meters, RoundedEmissionIntervalNeverExceedsTheRate) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit limit = MakeLimit(a, 3, 10 * kSecond, 1);  // T = 3 333 334 µs
    State state = FreshState(limit, kStart);
    ASSERT_TRUE(Decide(limit, state, kStart, 1).allowed);
    Decision d = Decide(limit, state, kStart, 1);
    EXPECT_EQ(d.retry_after.count(), 3'333'334) << AlgorithmName(a);
    int admitted = 1;
    for (int64_t t = kStart; t <= kStart + 10 * kSecond; t += 1'000) {
      admitted += Decide(limit, state, t, 1).allowed;
    }
    EXPECT_EQ(admitted, 3) << AlgorithmName(a);  // 3 in [0, 10s]: at 0, 3.33s, 6.67s
  }
}

// --- Reservations (max_delay) ----------------------------------------------------------------

const Params kMeterParams[] = {
    {Algorithm::kTokenBucket, 10, 10 * kSecond, std::nullopt},
    {Algorithm::kTokenBucket, 3, 10 * kSecond, 7},
    {Algorithm::kLeakyBucket, 10, 10 * kSecond, std::nullopt},
    {Algorithm::kLeakyBucket, 7, 1'000, 2},
    {Algorithm::kGcra, 10, 10 * kSecond, std::nullopt},
    {Algorithm::kGcra, 3, 10 * kSecond, 1},
};

// A max_delay per request: mostly none, else anything up to a few periods.
int64_t RandomMaxDelay(std::mt19937_64& rng, const Limit& limit) {
  const uint64_t dice = rng() % 4;
  if (dice == 0) return 0;
  if (dice == 1) return static_cast<int64_t>(rng() % (limit.emission_interval().count() + 1));
  return static_cast<int64_t>(rng() % (3 * limit.period().count()));
}

TEST(Reservation, MetersMatchTheReferenceQueue) {
  int booked = 0, denied = 0;
  for (const Params& p : kMeterParams) {
    const Limit limit = MakeLimit(p);
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      MeterModel model(p);
      State state = FreshState(limit, kStart);
      std::mt19937_64 rng(seed);
      for (const auto& [now, cost] : RandomTrace(limit, seed, 300)) {
        const int64_t max_delay = RandomMaxDelay(rng, limit);
        const Decision got = Decide(limit, state, now, cost, max_delay);
        const Expected want = model.Reserve(now, cost, max_delay);
        const auto where = [&, now = now, cost = cost] {
          return std::string(AlgorithmName(p.algorithm)) + " seed " + std::to_string(seed) + " t " +
                 std::to_string(now) + " cost " + std::to_string(cost) + " max_delay " +
                 std::to_string(max_delay);
        };
        ASSERT_EQ(got.allowed, want.allowed) << where();
        ASSERT_EQ(got.remaining, want.remaining) << where();
        ASSERT_EQ(got.retry_after.count(), want.retry_after) << where();
        ASSERT_EQ(got.reset_after.count(), want.reset_after) << where();
        ASSERT_EQ(got.delay.count(), want.delay) << where();
        booked += got.delay.count() > 0;
        denied += !got.allowed;
      }
    }
  }
  // The traces exercise bookings and denials substantially.
  EXPECT_GT(booked, 1000);
  EXPECT_GT(denied, 1000);
}

// A denied reservation's retry_after is exact for the same request with the same max_delay: it
// is denied 1 µs earlier and booked then, with a delay of exactly max_delay (or admitted outright
// when max_delay is 0). Denials consume nothing.
TEST(Reservation, RetryAfterIsExactAndDenialsConsumeNothing) {
  int denials = 0;
  for (const Params& p : kMeterParams) {
    const Limit limit = MakeLimit(p);
    for (uint64_t seed = 100; seed < 110; ++seed) {
      State state = FreshState(limit, kStart);
      std::mt19937_64 rng(seed);
      for (const auto& [now, cost] : RandomTrace(limit, seed, 200)) {
        const int64_t max_delay = RandomMaxDelay(rng, limit);
        const State before = state;
        const Decision d = Decide(limit, state, now, cost, max_delay);
        if (d.allowed) continue;
        ++denials;
        State after_denial = state, untouched = before;
        ASSERT_EQ(Decide(limit, after_denial, now, limit.capacity()),
                  Decide(limit, untouched, now, limit.capacity()))
            << AlgorithmName(p.algorithm) << " t " << now;
        const int64_t retry = d.retry_after.count();
        ASSERT_GT(retry, 0);
        State early = before, on_time = before;
        ASSERT_FALSE(Decide(limit, early, now + retry - 1, cost, max_delay).allowed)
            << AlgorithmName(p.algorithm) << " seed " << seed << " t " << now;
        const Decision later = Decide(limit, on_time, now + retry, cost, max_delay);
        ASSERT_TRUE(later.allowed)
            << AlgorithmName(p.algorithm) << " seed " << seed << " t " << now;
        ASSERT_EQ(later.delay.count(), cost > 0 ? max_delay : 0);
      }
    }
  }
  EXPECT_GT(denials, 500);
}

// With slots booked ahead the meters report, too, when one more unit than `remaining` fits.
TEST(Reservation, ReplenishAfterIsExactWithSlotsBooked) {
  for (const Params& p : kMeterParams) {
    const Limit limit = MakeLimit(p);
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      State state = FreshState(limit, kStart);
      std::mt19937_64 rng(seed);
      for (const auto& [now, cost] : RandomTrace(limit, seed, 200)) {
        const Decision d = Decide(limit, state, now, cost, RandomMaxDelay(rng, limit));
        ExpectReplenishAfterIsExact(limit, state, now, d,
                                    std::string(AlgorithmName(p.algorithm)) + " seed " +
                                        std::to_string(seed) + " t " + std::to_string(now));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Requests at one instant on 10/s with a burst of 1 and 5 s of queue: the first passes, the next
// 50 are booked 100 ms apart; the 52nd would wait 5.1 s and is refused.
TEST(Reservation, SimultaneousRequestsAreBookedOneIntervalApart) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit limit = MakeLimit(a, 10, kSecond, 1);
    State state = FreshState(limit, kStart);
    for (int64_t i = 0; i < 51; ++i) {
      const Decision d = Decide(limit, state, kStart, 1, 5 * kSecond);
      ASSERT_TRUE(d.allowed) << AlgorithmName(a) << " request " << i;
      ASSERT_EQ(d.delay.count(), i * 100'000) << AlgorithmName(a) << " request " << i;
      ASSERT_EQ(d.remaining, 0);
      ASSERT_EQ(d.reset_after.count(), (i + 1) * 100'000);
    }
    const Decision refused = Decide(limit, state, kStart, 1, 5 * kSecond);
    EXPECT_FALSE(refused.allowed) << AlgorithmName(a);
    EXPECT_EQ(refused.retry_after.count(), 100'000) << AlgorithmName(a);
    // A plain check sees the queue: it waits for every booked slot.
    EXPECT_EQ(Decide(limit, state, kStart, 1).retry_after.count(), 5'100'000) << AlgorithmName(a);
  }
}

// --- Giving units back (GiveBack) ------------------------------------------------------------

// GiveBack on a meter's state held in a State.
int64_t GiveBackTo(const Limit& limit, State& state, int64_t now, int64_t units) {
  return std::visit(
      [&](auto& s) -> int64_t {
        if constexpr (requires { GiveBack(limit, s, now, units); }) {
          return GiveBack(limit, s, now, units);
        } else {
          ADD_FAILURE() << "not a meter's state";
          return 0;
        }
      },
      state);
}

// 10 per 10 s: one unit per second. 4 consumed, then 3 given back half a second later: one unit
// is out, half a second from coming back; then more than is out: fresh, never fresher.
TEST(GiveBack, ReturnsUnitsUpToFresh) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit limit = MakeLimit(a, 10, 10 * kSecond);
    State state = FreshState(limit, kStart);
    ASSERT_TRUE(Decide(limit, state, kStart, 4).allowed);
    EXPECT_EQ(GiveBackTo(limit, state, kStart + kSecond / 2, 3), kSecond / 2) << AlgorithmName(a);
    Decision peek = Decide(limit, state, kStart + kSecond / 2, 0);
    EXPECT_EQ(peek.remaining, 9) << AlgorithmName(a);
    EXPECT_EQ(peek.reset_after.count(), kSecond / 2) << AlgorithmName(a);
    EXPECT_EQ(GiveBackTo(limit, state, kStart + kSecond / 2, 5), 0) << AlgorithmName(a);
    EXPECT_TRUE(Decide(limit, state, kStart + kSecond / 2, 10).allowed) << AlgorithmName(a);
    EXPECT_FALSE(Decide(limit, state, kStart + kSecond / 2, 1).allowed) << AlgorithmName(a);
  }
}

// Slots booked ahead come back by the same formulas: 10/s with a burst of 1, five booked 100 ms
// apart, three given back: a plain check waits as behind two bookings.
TEST(GiveBack, ReturnsBookedSlots) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit limit = MakeLimit(a, 10, kSecond, 1);
    State state = FreshState(limit, kStart), two_booked = state;
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(Decide(limit, state, kStart, 1, kSecond).allowed);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(Decide(limit, two_booked, kStart, 1, kSecond).allowed);
    EXPECT_EQ(GiveBackTo(limit, state, kStart, 1), 500'000) << AlgorithmName(a);
    EXPECT_EQ(GiveBackTo(limit, state, kStart, 1), 400'000) << AlgorithmName(a);
    EXPECT_EQ(GiveBackTo(limit, state, kStart, 1), 300'000) << AlgorithmName(a);
    EXPECT_EQ(Decide(limit, state, kStart, 1), Decide(limit, two_booked, kStart, 1))
        << AlgorithmName(a);
    EXPECT_EQ(Decide(limit, state, kStart, 1).retry_after.count(), 300'000) << AlgorithmName(a);
  }
}

// A state stamped later than now (the clock went back) keeps its stamp: what it holds still
// counts until the clock catches up, less the units given back.
TEST(GiveBack, AStateAheadOfTheClockStaysAhead) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit limit = MakeLimit(a, 10, 10 * kSecond);
    State state = FreshState(limit, kStart), expected = state;
    ASSERT_TRUE(Decide(limit, state, kStart + 5 * kSecond, 6).allowed);
    ASSERT_TRUE(Decide(limit, expected, kStart + 5 * kSecond, 4).allowed);
    const int64_t reset_after = GiveBackTo(limit, state, kStart, 2);
    const Decision peek = Decide(limit, state, kStart, 0);
    EXPECT_EQ(peek, Decide(limit, expected, kStart, 0)) << AlgorithmName(a);
    EXPECT_EQ(reset_after, peek.reset_after.count()) << AlgorithmName(a);
  }
}

// Random traces with reservations: a state A consumes u at some step and gets u back later, after
// other checks; B is the same trace without the consumption (kept when every other check was
// decided alike in both). While B was never full when looked at (at a check, or when the units
// come back), A is then B exactly: the same peek, the same decisions afterwards. Once B was full,
// its refill went to waste where A's did not, and what A gets back may have come back already: A
// then admits at least what B does (the give-back never returns less than the consumption took),
// and at most the units the meter refills between the consumption and the give-back more;
// docs/algorithms.md and GiveBack's comment say so.
TEST(GiveBack, UndoesAConsumptionWhileTheMeterWithoutItNeverFilled) {
  int exact = 0, filled = 0, over = 0;
  for (const Params& p : kMeterParams) {
    const Limit limit = MakeLimit(p);
    const int64_t cap = limit.capacity();
    const int64_t period = limit.period().count();
    for (uint64_t seed = 1; seed <= 400; ++seed) {
      std::mt19937_64 rng(seed);
      const auto random_cost = [&] { return static_cast<int64_t>(rng() % (cap + 1)); };
      int64_t now = kStart;
      State a = FreshState(limit, now);
      for (uint64_t i = rng() % 8; i > 0; --i) {
        now = NextRandomTime(rng, now, period);
        Decide(limit, a, now, random_cost(), RandomMaxDelay(rng, limit));
      }
      State b = a;
      now = NextRandomTime(rng, now, period);
      const int64_t units = 1 + static_cast<int64_t>(rng() % cap);
      if (!Decide(limit, a, now, units, RandomMaxDelay(rng, limit)).allowed) continue;
      const int64_t consumed_at = now;
      const auto where = [&] {
        return std::string(AlgorithmName(p.algorithm)) + " capacity " + std::to_string(cap) +
               " seed " + std::to_string(seed) + " t " + std::to_string(now);
      };
      bool b_filled = Decide(limit, b, now, 0).remaining == cap;
      bool alike = true;
      for (uint64_t i = rng() % 6; i > 0 && alike; --i) {
        now = NextRandomTime(rng, now, period / 4);
        b_filled = b_filled || Decide(limit, b, now, 0).remaining == cap;
        const int64_t cost = random_cost(), max_delay = RandomMaxDelay(rng, limit);
        alike = Decide(limit, a, now, cost, max_delay).allowed ==
                Decide(limit, b, now, cost, max_delay).allowed;
      }
      if (!alike) continue;
      now = NextRandomTime(rng, now, period / 4);
      const Decision b_peek = Decide(limit, b, now, 0);
      b_filled = b_filled || b_peek.remaining == cap;
      const int64_t reset_after = GiveBackTo(limit, a, now, units);
      const Decision a_peek = Decide(limit, a, now, 0);
      ASSERT_EQ(reset_after, a_peek.reset_after.count()) << where();
      if (b_filled) {
        ++filled;
        ASSERT_GE(a_peek.remaining, b_peek.remaining) << where();
        const int64_t interval = limit.emission_interval().count();
        const int64_t refilled = (now - consumed_at + interval - 1) / interval;
        ASSERT_LE(a_peek.remaining - b_peek.remaining, refilled) << where();
        over += a_peek.remaining > b_peek.remaining;
        continue;
      }
      ++exact;
      ASSERT_EQ(a_peek, b_peek) << where();
      for (int i = 0; i < 8; ++i) {
        now = NextRandomTime(rng, now, period / 4);
        const int64_t cost = random_cost(), max_delay = RandomMaxDelay(rng, limit);
        ASSERT_EQ(Decide(limit, a, now, cost, max_delay), Decide(limit, b, now, cost, max_delay))
            << where() << " then " << i;
      }
    }
  }
  EXPECT_GT(exact, 300);
  EXPECT_GT(filled, 300);
  EXPECT_GT(over, 100);  // the traces do reach the case where A admits more than B
}

TEST(Peek, ReportsWithoutConsuming) {
  for (Algorithm a : kAllAlgorithms) {
    const Limit limit = MakeLimit(a, 2, 10 * kSecond);
    State state = FreshState(limit, kStart);
    Decision peek = Decide(limit, state, kStart, 0);
    EXPECT_TRUE(peek.allowed) << AlgorithmName(a);
    EXPECT_EQ(peek.remaining, 2) << AlgorithmName(a);
    EXPECT_EQ(peek.reset_after.count(), 0) << AlgorithmName(a);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(Decide(limit, state, kStart, 0).allowed);
    EXPECT_TRUE(Decide(limit, state, kStart, 1).allowed) << AlgorithmName(a);
    peek = Decide(limit, state, kStart, 0);
    EXPECT_TRUE(peek.allowed) << AlgorithmName(a);
    EXPECT_EQ(peek.remaining, 1) << AlgorithmName(a);
    EXPECT_TRUE(Decide(limit, state, kStart, 1).allowed) << AlgorithmName(a);
    peek = Decide(limit, state, kStart, 0);
    EXPECT_FALSE(peek.allowed) << AlgorithmName(a);
    EXPECT_EQ(peek.remaining, 0) << AlgorithmName(a);
    EXPECT_GT(peek.retry_after.count(), 0) << AlgorithmName(a);
  }
}

TEST(State, AnotherAlgorithmsStateIsReplacedByAFreshOne) {
  const Limit gcra = MakeLimit(Algorithm::kGcra, 1, kSecond);
  const Limit window = MakeLimit(Algorithm::kFixedWindow, 1, kSecond);
  State state = FreshState(gcra, kStart);
  EXPECT_TRUE(Decide(gcra, state, kStart, 1).allowed);
  EXPECT_TRUE(Decide(window, state, kStart, 1).allowed);
  EXPECT_TRUE(std::holds_alternative<FixedWindowState>(state));
}

// The "bytes" column of docs/algorithms.md (x86-64, libstdc++): checked so the doc stays true.
TEST(StateSize, BytesPerKey) {
  std::printf(
      "state bytes: fixed_window %zu, sliding_log %zu + %zu per distinct admission instant, "
      "sliding_window %zu, token_bucket %zu, leaky_bucket %zu, gcra %zu; "
      "core::State variant %zu; std::string %zu\n",
      sizeof(FixedWindowState), sizeof(SlidingLogState), sizeof(SlidingLogState::Entry),
      sizeof(SlidingWindowState), sizeof(TokenBucketState), sizeof(LeakyBucketState),
      sizeof(GcraState), sizeof(State), sizeof(std::string));
  EXPECT_EQ(sizeof(FixedWindowState), 16u);
  EXPECT_EQ(sizeof(SlidingLogState), 32u);
  EXPECT_EQ(sizeof(SlidingLogState::Entry), 16u);
  EXPECT_EQ(sizeof(SlidingWindowState), 32u);
  EXPECT_EQ(sizeof(TokenBucketState), 16u);
  EXPECT_EQ(sizeof(LeakyBucketState), 16u);
  EXPECT_EQ(sizeof(GcraState), 8u);
  EXPECT_EQ(sizeof(State), 40u);
}

}  // namespace
}  // namespace sluice::core
