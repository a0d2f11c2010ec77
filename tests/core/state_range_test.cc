// States out of the bounds every state sluice writes stays within (core::InRange): a time beyond
// kMaxStateAhead past now or before the epoch, a count above Limit::kMaxCount or below zero, a
// meter's units beyond its capacity that would take longer than kMaxStateAhead to drain, a
// sliding_log holding more than it can. Both entry points of the memory store, core::Decide on the
// variant and memory::DecideStored, decide them as a fresh state (a key holding another
// algorithm's state), as the Redis scripts decide such values read from a key; states at the
// bounds are kept and decided as they are.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/algorithms.h"
#include "memory/stored_state.h"

namespace sluice::core {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kNow = 1'700'000'000'123'456;
constexpr int64_t kLate = kNow + kMaxStateAhead + 1;  // the first time out of bounds
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Limit LimitOf(Algorithm algorithm) { return *Limit::Create(algorithm, 3, 1h); }

// The units beyond a meter's capacity that drain in kMaxStateAhead, 3 per hour.
int64_t MostDebt() {
  return kMaxStateAhead / LimitOf(Algorithm::kGcra).emission_interval().count();
}

std::vector<State> OutOfRange(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      return {FixedWindowState{.latest = kLate, .count = 1},
              FixedWindowState{.latest = -1, .count = 0},
              FixedWindowState{.latest = kNow, .count = Limit::kMaxCount + 1},
              FixedWindowState{.latest = kNow, .count = -1},
              FixedWindowState{.latest = kMax, .count = kMax}};
    case Algorithm::kSlidingLog:
      return {
          SlidingLogState{.entries = {{.at = kLate, .count = 1}}},
          SlidingLogState{.entries = {{.at = -1, .count = 1}}},
          SlidingLogState{.entries = {{.at = kNow - 1, .count = Limit::kMaxSlidingLogCount + 1}}},
          SlidingLogState{.entries = {{.at = kNow - 1, .count = -1}}},
          SlidingLogState{.entries = {{.at = kNow - 1, .count = 1}}, .first_live = 2},
          SlidingLogState{.entries = {{.at = kNow - 7'200'000'000, .count = 5},
                                      {.at = kNow - 1, .count = kMin}},
                          .first_live = 1},
          SlidingLogState{.entries = {{.at = kMax, .count = kMax}}}};
    case Algorithm::kSlidingWindow:
      return {SlidingWindowState{.window_start = kLate, .latest = kNow, .previous = 1},
              SlidingWindowState{.window_start = kNow, .latest = kLate, .current = 1},
              SlidingWindowState{.window_start = -1, .latest = kNow, .current = 1},
              SlidingWindowState{
                  .window_start = kNow, .latest = kNow, .previous = Limit::kMaxCount + 1},
              SlidingWindowState{.window_start = kNow, .latest = kNow, .current = -1},
              SlidingWindowState{
                  .window_start = kMax, .latest = kMax, .previous = kMax, .current = kMax}};
    case Algorithm::kTokenBucket:
      return {TokenBucketState{.tokens = -MostDebt() - 1, .refilled_at = kNow},
              TokenBucketState{.tokens = Limit::kMaxCount + 1, .refilled_at = kNow},
              TokenBucketState{.tokens = 1, .refilled_at = kLate},
              TokenBucketState{.tokens = 1, .refilled_at = -1},
              TokenBucketState{.tokens = kMin, .refilled_at = kMax}};
    case Algorithm::kLeakyBucket:
      return {LeakyBucketState{.level = 3 + MostDebt() + 1, .drained_at = kNow},
              LeakyBucketState{.level = -1, .drained_at = kNow},
              LeakyBucketState{.level = 1, .drained_at = kLate},
              LeakyBucketState{.level = 1, .drained_at = -1},
              LeakyBucketState{.level = kMax, .drained_at = kMax}};
    case Algorithm::kGcra:
      break;
  }
  return {GcraState{.theoretical_arrival = kLate}, GcraState{.theoretical_arrival = -1},
          GcraState{.theoretical_arrival = kMax}, GcraState{.theoretical_arrival = kMin}};
}

// A full state at the bounds: kept, so the check is denied.
State AtTheBounds(Algorithm algorithm) {
  const int64_t latest = kNow + kMaxStateAhead;
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      return FixedWindowState{.latest = latest, .count = 3};
    case Algorithm::kSlidingLog:
      return SlidingLogState{.entries = {{.at = latest, .count = 3}}};
    case Algorithm::kSlidingWindow:
      return SlidingWindowState{.window_start = latest, .latest = latest, .current = 3};
    case Algorithm::kTokenBucket:
      return TokenBucketState{.tokens = -MostDebt(), .refilled_at = latest};
    case Algorithm::kLeakyBucket:
      return LeakyBucketState{.level = 3 + MostDebt(), .drained_at = latest};
    case Algorithm::kGcra:
      break;
  }
  return GcraState{.theoretical_arrival = latest};
}

std::string Describe(const Decision& d) {
  return std::string(d.allowed ? "allowed" : "denied") +
         " remaining=" + std::to_string(d.remaining) +
         " retry_after=" + std::to_string(d.retry_after.count()) +
         " reset_after=" + std::to_string(d.reset_after.count());
}

// The decision on `state` through memory::DecideStored, as MemoryStore keeps it.
Decision DecideStored(const Limit& limit, State state, int64_t cost) {
  memory::StoredState stored;
  uint8_t kind = memory::Construct(std::move(state), &stored);
  const Decision decision = memory::DecideStored(limit, kind, stored, kNow, cost, 0);
  memory::StoredStateTraits::Destroy(kind, stored);
  return decision;
}

class StateRange : public ::testing::TestWithParam<Algorithm> {};

TEST_P(StateRange, OutOfRangeStatesAreDecidedAsFresh) {
  const Limit limit = LimitOf(GetParam());
  for (int64_t cost : {0, 1, 3}) {
    State fresh = FreshState(limit, kNow);
    const Decision want = Decide(limit, fresh, kNow, cost);
    int n = 0;
    for (const State& bad : OutOfRange(GetParam())) {
      const std::string what = std::string(AlgorithmName(GetParam())) + " state " +
                               std::to_string(n++) + ", cost " + std::to_string(cost);
      State state = bad;
      EXPECT_FALSE(std::visit([&](const auto& s) { return InRange(limit, s, kNow); }, state))
          << what;
      const Decision got = Decide(limit, state, kNow, cost);
      EXPECT_EQ(got, want) << what << ": " << Describe(got) << ", fresh " << Describe(want);
      const Decision stored = DecideStored(limit, bad, cost);
      EXPECT_EQ(stored, want) << what << " (stored): " << Describe(stored);
    }
  }
}

TEST_P(StateRange, StatesAtTheBoundsAreKept) {
  const Limit limit = LimitOf(GetParam());
  State state = AtTheBounds(GetParam());
  EXPECT_TRUE(std::visit([&](const auto& s) { return InRange(limit, s, kNow); }, state));
  const Decision got = Decide(limit, state, kNow, 1);
  EXPECT_FALSE(got.allowed) << Describe(got);
  EXPECT_GT(got.retry_after, kMaxStateAhead * 1us - 1h) << Describe(got);
  EXPECT_EQ(DecideStored(limit, AtTheBounds(GetParam()), 1), got);
}

INSTANTIATE_TEST_SUITE_P(All, StateRange, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

}  // namespace
}  // namespace sluice::core
