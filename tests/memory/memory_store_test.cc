#include "sluice/memory_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sluice/limiter.h"
#include "support/all_or_nothing_model.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Key(int i) { return std::string("k").append(std::to_string(i)); }

Limit MakeLimit(Algorithm a, int64_t count, Duration period,
                std::optional<int64_t> burst = std::nullopt) {
  auto limit = Limit::Create(a, count, period, burst);
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

std::string Name(Algorithm a) { return std::string(AlgorithmName(a)); }

// --- Hand-computed decisions, one algorithm at a time
// ---------------------------------------------

struct Step {
  Duration at;  // since the clock's start, which is aligned to every window used here
  int64_t cost;
  bool allowed;
  int64_t remaining;
  Duration retry_after;
  Duration reset_after;
};

void ExpectSteps(const Limit& limit, const std::vector<Step>& steps) {
  ManualClock clock;
  const Time start = clock.now();
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  Limiter limiter(store, "api", limit);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    clock.Set(start + s.at);
    auto d = limiter.Check("user", s.cost);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    const std::string where = Name(limit.algorithm()) + " step " + std::to_string(i);
    EXPECT_EQ(d->allowed, s.allowed) << where;
    EXPECT_EQ(d->limit, limit.count()) << where;
    EXPECT_EQ(d->remaining, s.remaining) << where;
    EXPECT_EQ(d->retry_after, s.retry_after) << where;
    EXPECT_EQ(d->reset_after, s.reset_after) << where;
  }
  // Reset forgets everything: the whole capacity is there again at once.
  ASSERT_TRUE(limiter.Reset("user").ok());
  EXPECT_EQ(store.size(), 0u);
  EXPECT_TRUE(limiter.Check("user", limit.capacity())->allowed) << Name(limit.algorithm());
}

constexpr Duration k0{0};

TEST(Decisions, FixedWindow) {  // 3 per 10 s
  ExpectSteps(MakeLimit(Algorithm::kFixedWindow, 3, seconds(10)),
              {
                  {seconds(2), 1, true, 2, k0, seconds(8)},
                  {seconds(2), 2, true, 0, k0, seconds(8)},
                  {seconds(5), 1, false, 0, seconds(5), seconds(5)},  // wait for the next window
                  {seconds(5), 0, false, 0, seconds(5), seconds(5)},  // a peek says the same
                  {seconds(10), 3, true, 0, k0, seconds(10)},
                  {seconds(10), 0, false, 0, seconds(10), seconds(10)},
              });
}

TEST(Decisions, SlidingLog) {  // 3 per 10 s
  ExpectSteps(MakeLimit(Algorithm::kSlidingLog, 3, seconds(10)),
              {
                  {k0, 1, true, 2, k0, seconds(10)},
                  {seconds(4), 2, true, 0, k0, seconds(10)},
                  {seconds(6), 1, false, 0, seconds(4), seconds(8)},  // the unit of t=0 leaves
                  {seconds(6), 2, false, 0, seconds(8), seconds(8)},  // needs those of t=4 s too
                  {seconds(6), 0, false, 0, seconds(4), seconds(8)},
                  {seconds(10), 1, true, 0, k0, seconds(10)},
                  {seconds(14), 0, true, 2, k0, seconds(6)},
              });
}

TEST(Decisions, SlidingWindow) {  // 4 per 10 s; estimate = previous × (10 s − e)/10 s + current
  ExpectSteps(MakeLimit(Algorithm::kSlidingWindow, 4, seconds(10)),
              {
                  {seconds(2), 4, true, 0, k0, seconds(18)},
                  // Next window: 4 × (10 − e)/10 + 1 <= 4 from e = 2.5 s.
                  {seconds(2), 1, false, 0, milliseconds(10'500), seconds(18)},
                  {milliseconds(12'500), 1, true, 0, k0, milliseconds(17'500)},
                  {seconds(15), 0, true, 1, k0, seconds(15)},  // estimate 4 × 0.5 + 1 = 3
                  // 4 × (10 − e)/10 + 1 + 2 <= 4 from e = 7.5 s.
                  {seconds(15), 2, false, 1, milliseconds(2'500), seconds(15)},
                  {milliseconds(17'500), 2, true, 0, k0, milliseconds(12'500)},
              });
}

// 3 per 3 s: one unit per second, capacity 3. The three meters give the same numbers.
TEST(Decisions, Meters) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    ExpectSteps(MakeLimit(a, 3, seconds(3)),
                {
                    {k0, 3, true, 0, k0, seconds(3)},
                    {milliseconds(500), 1, false, 0, milliseconds(500), milliseconds(2'500)},
                    {seconds(1), 1, true, 0, k0, seconds(3)},
                    {milliseconds(2'250), 0, true, 1, k0, milliseconds(1'750)},
                    {milliseconds(2'250), 2, false, 1, milliseconds(750), milliseconds(1'750)},
                    {seconds(5), 3, true, 0, k0, seconds(3)},  // full again since 4 s
                });
  }
}

// A burst above the rate: 1 per second, up to 5 at once.
TEST(Decisions, MetersWithBurst) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    ExpectSteps(MakeLimit(a, 1, seconds(1), 5),
                {
                    {k0, 5, true, 0, k0, seconds(5)},
                    {k0, 1, false, 0, seconds(1), seconds(5)},
                    {seconds(2), 3, false, 2, seconds(1), seconds(3)},
                    {seconds(3), 3, true, 0, k0, seconds(5)},
                });
  }
}

// --- The store's own behaviour -------------------------------------------------------------------

class EveryAlgorithm : public ::testing::TestWithParam<Algorithm> {
 protected:
  Limit limit_ = MakeLimit(GetParam(), 3, seconds(10));
};

INSTANTIATE_TEST_SUITE_P(MemoryStore, EveryAlgorithm, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return Name(info.param); });

// Bad requests get errors and leave the key exactly as a store that never saw them.
TEST_P(EveryAlgorithm, BadInputIsRefusedAndChangesNothing) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock}),
      control(MemoryStoreOptions{.clock = &clock});
  Limiter limiter(store, "api", limit_), same(control, "api", limit_);
  ASSERT_TRUE(limiter.Check("k")->allowed);
  ASSERT_TRUE(same.Check("k")->allowed);

  EXPECT_EQ(limiter.Check("").status().code(), StatusCode::kInvalidArgument);
  auto too_long = limiter.Check(std::string(kMaxKeyBytes + 1, 'k'));
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(too_long.status().message(), "key is 513 bytes, above the maximum 512");
  auto negative = limiter.Check("k", -1);
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "cost must not be negative, got -1");
  auto too_big = limiter.Check("k", 4);
  EXPECT_EQ(too_big.status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_EQ(too_big.status().message(),
            "cost 4 exceeds the capacity 3 of this limit; it can never be admitted");
  Result<Decision> async = Status::Internal("callback not run");
  limiter.CheckAsync("k", 4, [&](Result<Decision> d) { async = std::move(d); });
  EXPECT_EQ(async.status().code(), StatusCode::kCostExceedsLimit);

  EXPECT_EQ(store.size(), 1u);
  clock.Advance(milliseconds(1));
  EXPECT_EQ(*limiter.Check("k", 2), *same.Check("k", 2));
  EXPECT_EQ(*limiter.Check("k", 1), *same.Check("k", 1));
  // The longest key accepted is kMaxKeyBytes.
  EXPECT_TRUE(limiter.Check(std::string(kMaxKeyBytes, 'k')).ok());
}

// A batch decides its entries in order, as the same checks made one by one would; a bad entry
// gets its error and does not stop the others. The async batch gives the same.
TEST_P(EveryAlgorithm, BatchDecidesInOrderAroundBadEntries) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock}),
      one_by_one(MemoryStoreOptions{.clock = &clock}),
      async_store(MemoryStoreOptions{.clock = &clock});
  Limiter batch(store, "api", limit_), single(one_by_one, "api", limit_),
      async(async_store, "api", limit_);
  const KeyCost checks[] = {{"a", 2}, {"a", 1}, {"", 1},  {"a", 1}, {"b", -2},
                            {"b", 9}, {"b", 3}, {"a", 0}, {"b", 1}};
  const auto results = batch.CheckBatch(checks);
  std::vector<Result<Decision>> async_results;
  async.CheckBatchAsync(checks, [&](auto r) { async_results = std::move(r); });
  ASSERT_EQ(results.size(), std::size(checks));
  ASSERT_EQ(async_results.size(), std::size(checks));
  for (size_t i = 0; i < std::size(checks); ++i) {
    const auto want = single.Check(checks[i].key, checks[i].cost);
    ASSERT_EQ(results[i].ok(), want.ok()) << i;
    ASSERT_EQ(async_results[i].ok(), want.ok()) << i;
    if (want.ok()) {
      EXPECT_EQ(*results[i], *want) << i;
      EXPECT_EQ(*async_results[i], *want) << i;
    } else {
      EXPECT_EQ(results[i].status(), want.status()) << i;
      EXPECT_EQ(async_results[i].status(), want.status()) << i;
    }
  }
  EXPECT_TRUE(results[0]->allowed);
  EXPECT_TRUE(results[1]->allowed);
  EXPECT_EQ(results[2].status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(results[3]->allowed);
  EXPECT_EQ(results[4].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(results[5].status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_TRUE(results[6]->allowed);
  EXPECT_FALSE(results[7]->allowed);
  EXPECT_FALSE(results[8]->allowed);
}

TEST_P(EveryAlgorithm, AsyncFormsAgreeWithSync) {
  ManualClock clock;
  MemoryStore sync_store(MemoryStoreOptions{.clock = &clock});
  MemoryStore async_store(MemoryStoreOptions{.clock = &clock});
  Limiter sync(sync_store, "x", limit_), async(async_store, "x", limit_);
  for (int i = 0; i < 30; ++i) {
    clock.Advance(milliseconds(900));
    const int64_t cost = i % 4;
    const Result<Decision> want = sync.Check("key", cost);
    Result<Decision> got = Status::Internal("callback not run");
    async.CheckAsync("key", cost, [&](Result<Decision> d) { got = std::move(d); });
    ASSERT_TRUE(want.ok());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, *want) << "step " << i;
  }
  Status reset = Status::Internal("callback not run");
  async_store.ResetAsync("x", "key", [&](Status s) { reset = std::move(s); });
  EXPECT_TRUE(reset.ok());
  EXPECT_EQ(async_store.size(), 0u);
}

TEST_P(EveryAlgorithm, PeekCreatesNoKey) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  Limiter limiter(store, "api", limit_);
  auto peek = limiter.Check("k", 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_TRUE(peek->allowed);
  EXPECT_EQ(peek->remaining, 3);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(limiter.Check("k", 3)->remaining, 0);
  EXPECT_EQ(limiter.Reset("").code(), StatusCode::kInvalidArgument);
}

// A key is held until its reset_after passes, then a sweep drops it.
TEST_P(EveryAlgorithm, KeysExpireAndAreSwept) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .shards = 4});
  Limiter limiter(store, "api", limit_);
  clock.Advance(seconds(3));  // mid-window
  Duration reset{0};          // the same for every key: same cost at the same time
  for (int i = 0; i < 20; ++i) {
    auto d = limiter.Check(Key(i), 2);
    ASSERT_TRUE(d.ok() && d->allowed);
    reset = d->reset_after;
  }
  ASSERT_GT(reset.count(), 0);
  EXPECT_EQ(store.size(), 20u);
  clock.Advance(reset - Duration(1));
  EXPECT_EQ(store.Sweep(), 0u);
  EXPECT_EQ(store.size(), 20u);
  clock.Advance(Duration(1));
  EXPECT_EQ(store.Sweep(), 20u);
  EXPECT_EQ(store.size(), 0u);
}

TEST(MemoryStoreTest, LimitersWithDifferentNamesDoNotShareState) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit limit = MakeLimit(Algorithm::kFixedWindow, 1, seconds(10));
  Limiter login(store, "login", limit), api(store, "api", limit);
  EXPECT_TRUE(login.Check("user:1")->allowed);
  EXPECT_TRUE(api.Check("user:1")->allowed);
  EXPECT_FALSE(login.Check("user:1")->allowed);
  EXPECT_FALSE(api.Check("user:1")->allowed);
  ASSERT_TRUE(login.Reset("user:1").ok());
  EXPECT_TRUE(login.Check("user:1")->allowed);
  EXPECT_FALSE(api.Check("user:1")->allowed);  // resetting one name leaves the other alone
  // Names and keys cannot be shifted into each other.
  Limiter a(store, "a", limit), ab(store, "ab", limit);
  EXPECT_TRUE(a.Check("bc")->allowed);
  EXPECT_TRUE(ab.Check("c")->allowed);
}

// A reset takes the same scope and key as a check, and refuses what a check refuses, with the
// same message, touching no state.
TEST(MemoryStoreTest, ResetRefusesWhatACheckRefuses) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit limit = MakeLimit(Algorithm::kFixedWindow, 1, seconds(10));
  ASSERT_TRUE(store.Check({.scope = "api", .limit = &limit, .key = "k"})->allowed);
  const std::string long_key(kMaxKeyBytes + 1, 'k');
  const std::string long_scope(kMaxScopeBytes + 1, 's');
  const std::pair<std::string_view, std::string_view> bad[] = {
      {"api", ""}, {"api", long_key}, {long_scope, "k"}};
  for (const auto& [scope, key] : bad) {
    const Status check = store.Check({.scope = scope, .limit = &limit, .key = key}).status();
    ASSERT_EQ(check.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store.Reset(scope, key), check);
    Status async = Status::Internal("callback not run");
    store.ResetAsync(scope, key, [&](Status s) { async = std::move(s); });
    EXPECT_EQ(async, check);
  }
  EXPECT_EQ(store.size(), 1u);
  EXPECT_FALSE(store.Check({.scope = "api", .limit = &limit, .key = "k"})->allowed);
  // The longest key and scope accepted are kMaxKeyBytes and kMaxScopeBytes.
  EXPECT_TRUE(store.Reset(std::string(kMaxScopeBytes, 's'), std::string(kMaxKeyBytes, 'k')).ok());
}

// --- GiveBack ----------------------------------------------------------------------------------

constexpr Algorithm kMeters[] = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                 Algorithm::kGcra};

// 10 per 10 s (a unit a second): 6 taken, 4 given back half a second later. The key holds the
// state the give-back left, until it is fresh (1.5 s on), in the same bytes; giving back more
// than is out leaves it fresh, and the key is gone.
TEST(MemoryStoreGiveBack, ReturnsUnitsAndKeepsTheKeyAsLongAsItsState) {
  for (Algorithm a : kMeters) {
    ManualClock clock;
    MemoryStore store(MemoryStoreOptions{.clock = &clock});
    const Limit limit = MakeLimit(a, 10, seconds(10));
    const CheckRequest take{.scope = "api", .limit = &limit, .key = "k", .cost = 6};
    const CheckRequest peek{.scope = "api", .limit = &limit, .key = "k", .cost = 0};
    ASSERT_TRUE(store.Check(take)->allowed);
    const size_t bytes = store.memory_stats().bytes;
    clock.Advance(milliseconds(500));
    ASSERT_TRUE(store.GiveBack("api", limit, "k", 4).ok()) << Name(a);
    EXPECT_EQ(store.Check(peek)->remaining, 8) << Name(a);
    EXPECT_EQ(store.Check(peek)->reset_after, milliseconds(1500)) << Name(a);
    EXPECT_EQ(store.memory_stats().bytes, bytes) << Name(a);
    clock.Advance(milliseconds(1500) - Duration(1));
    EXPECT_EQ(store.Sweep(), 0u) << Name(a);
    clock.Advance(Duration(1));
    EXPECT_EQ(store.Sweep(), 1u) << Name(a);

    ASSERT_TRUE(store.Check(take)->allowed);
    Status async = Status::Internal("callback not run");
    store.GiveBackAsync("api", limit, "k", 7, [&](Status s) { async = std::move(s); });
    EXPECT_TRUE(async.ok()) << Name(a);
    EXPECT_EQ(store.size(), 0u) << Name(a);
    EXPECT_EQ(store.Check(peek)->remaining, 10) << Name(a);
  }
}

// A give-back applied after its apply_by returns a unit less per emission interval, or part of
// one, past it, and nothing once that is all of it.
TEST(MemoryStoreGiveBack, AppliedLateReturnsLess) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit limit = MakeLimit(Algorithm::kGcra, 100, seconds(10));  // a unit per 100 ms
  const CheckRequest take{.scope = "api", .limit = &limit, .key = "k", .cost = 60};
  const CheckRequest peek{.scope = "api", .limit = &limit, .key = "k", .cost = 0};
  ASSERT_TRUE(store.Check(take)->allowed);
  ASSERT_TRUE(store.GiveBack("api", limit, "k", 10, clock.now()).ok());  // on time: all of it
  EXPECT_EQ(store.Check(peek)->remaining, 50);
  ASSERT_TRUE(store.GiveBack("api", limit, "k", 10, clock.now() - milliseconds(250)).ok());
  EXPECT_EQ(store.Check(peek)->remaining, 57) << "250 ms late: 3 units less";
  ASSERT_TRUE(store.GiveBack("api", limit, "k", 10, clock.now() - seconds(2)).ok());
  EXPECT_EQ(store.Check(peek)->remaining, 57) << "2 s late: nothing";
}

// No state, or another algorithm's under the key: nothing changes, and the answer is ok.
TEST(MemoryStoreGiveBack, LeavesAbsentKeysAndOtherAlgorithmsStatesAsTheyAre) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit gcra = MakeLimit(Algorithm::kGcra, 2, seconds(10));
  const Limit bucket = MakeLimit(Algorithm::kTokenBucket, 2, seconds(10));
  const Limit window = MakeLimit(Algorithm::kFixedWindow, 2, seconds(10));
  EXPECT_TRUE(store.GiveBack("api", gcra, "absent", 1).ok());
  EXPECT_EQ(store.size(), 0u);
  for (const Limit* held : {&bucket, &window}) {
    const CheckRequest check{.scope = "api", .limit = held, .key = "k", .cost = 2};
    ASSERT_TRUE(store.Check(check)->allowed);
    EXPECT_TRUE(store.GiveBack("api", gcra, "k", 2).ok());
    // Its own algorithm still finds it spent.
    EXPECT_FALSE(store.Check(check)->allowed) << Name(held->algorithm());
    ASSERT_TRUE(store.Reset("api", "k").ok());
  }
}

// What GiveBack refuses, refused alike by both forms with INVALID_ARGUMENT, changing nothing.
TEST(MemoryStoreGiveBack, RefusesNonMetersAndUnitsOutsideTheCapacity) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit gcra = MakeLimit(Algorithm::kGcra, 3, seconds(10));
  const Limit window = MakeLimit(Algorithm::kFixedWindow, 3, seconds(10));
  const CheckRequest peek{.scope = "api", .limit = &gcra, .key = "k", .cost = 0};
  ASSERT_TRUE(store.Check({.scope = "api", .limit = &gcra, .key = "k", .cost = 3})->allowed);
  const Decision before = *store.Check(peek);
  struct Bad {
    const Limit* limit;
    std::string_view key;
    int64_t units;
    std::string_view message;
  };
  const Bad bad[] = {
      {&window, "k", 1,
       "only token_bucket, leaky_bucket and gcra give units back, not fixed_window"},
      {&gcra, "k", 0, "units to give back must be between 1 and the capacity 3, got 0"},
      {&gcra, "k", 4, "units to give back must be between 1 and the capacity 3, got 4"},
      {&gcra, "", 1, "key must not be empty"},
  };
  for (const Bad& b : bad) {
    const Status sync = store.GiveBack("api", *b.limit, b.key, b.units);
    EXPECT_EQ(sync.code(), StatusCode::kInvalidArgument) << b.message;
    EXPECT_EQ(sync.message(), b.message);
    Status async = Status::Internal("callback not run");
    store.GiveBackAsync("api", *b.limit, b.key, b.units, [&](Status s) { async = std::move(s); });
    EXPECT_EQ(async, sync);
  }
  EXPECT_EQ(*store.Check(peek), before);
}

// At max_keys, a new key is admitted and makes room by evicting keys not used lately; a key in
// use keeps its exact count however many new keys pass.
TEST(MemoryStoreBound, AtMaxKeysNewKeysEvictTheLeastRecentlyUsedAndKeysInUseKeepTheirCounts) {
  ManualClock clock;
  // One shard, so the bound is exactly max_keys (it is split evenly over shards).
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 64, .shards = 1});
  Limiter limiter(store, "api", MakeLimit(Algorithm::kFixedWindow, 1000, std::chrono::hours(1)));
  constexpr int kClients = 8;
  std::vector<int64_t> checks(kClients, 0);
  const auto check_clients = [&] {
    for (int c = 0; c < kClients; ++c) {
      auto d = limiter.Check("client" + std::to_string(c));
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      EXPECT_EQ(d->remaining, 1000 - ++checks[c]) << "client " << c;
    }
  };
  check_clients();
  for (int i = 0; i < 2000; ++i) {
    auto d = limiter.Check(Key(i));
    ASSERT_TRUE(d.ok()) << i << " " << d.status().ToString();
    EXPECT_EQ(d->remaining, 999) << i;
    ASSERT_LE(store.size(), 64u);
    if (i % 16 == 15) check_clients();
  }
  const StoreMemoryStats stats = store.memory_stats();
  EXPECT_EQ(stats.keys, store.size());
  EXPECT_EQ(stats.evicted_fresh, 0u);  // nothing is back to fresh within the hour
  EXPECT_GE(stats.evicted_lru, 2000u + kClients - 64);
  // A peek of an unknown key takes no room, and evicts nothing.
  EXPECT_TRUE(limiter.Check(Key(5000), 0).ok());
  EXPECT_EQ(store.memory_stats().evicted_lru, stats.evicted_lru);
}

// Room is made first from states back to fresh (dropping them changes no decision), then from
// the keys not checked lately: a key checked again since it was added stays through the hand's
// round.
TEST(MemoryStoreBound, FreshStatesGoFirstThenKeysNotUsedSince) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 16, .shards = 1});
  Limiter brief(store, "brief", MakeLimit(Algorithm::kSlidingLog, 3, seconds(1)));
  Limiter lasting(store, "lasting", MakeLimit(Algorithm::kSlidingLog, 3, seconds(100)));
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(brief.Check(Key(i))->allowed);
    ASSERT_TRUE(lasting.Check(Key(i))->allowed);
  }
  ASSERT_EQ(store.size(), 16u);
  clock.Advance(seconds(2));  // every "brief" state is back to fresh
  for (int i = 0; i < 4; ++i) ASSERT_EQ(lasting.Check(Key(i))->remaining, 1);  // used again

  Limiter other(store, "other", MakeLimit(Algorithm::kSlidingLog, 3, seconds(100)));
  ASSERT_TRUE(other.Check(Key(0))->allowed);
  StoreMemoryStats stats = store.memory_stats();
  EXPECT_EQ(stats.evicted_fresh, 8u);  // all of them, at once
  EXPECT_EQ(stats.evicted_lru, 0u);
  EXPECT_EQ(store.size(), 9u);
  // Up to the bound, nothing more goes.
  for (int i = 1; i < 8; ++i) ASSERT_TRUE(other.Check(Key(i))->allowed);
  EXPECT_EQ(store.size(), 16u);
  EXPECT_EQ(store.memory_stats().evicted_lru, 0u);
  // Past it, keys used once go, down to 7/8 of the bound to spare the next inserts the work: the
  // four "lasting" keys checked again keep their counts.
  ASSERT_TRUE(other.Check(Key(8))->allowed);
  stats = store.memory_stats();
  EXPECT_EQ(stats.evicted_lru, 3u);
  EXPECT_EQ(store.size(), 14u);
  for (int i = 0; i < 4; ++i) {
    auto d = lasting.Check(Key(i));
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->allowed) << i;
    EXPECT_EQ(d->remaining, 0) << i;
  }
}

TEST(MemoryStoreBound, ShardedStoreNeverHoldsMoreThanMaxKeys) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 64, .shards = 4});
  Limiter limiter(store, "api", MakeLimit(Algorithm::kGcra, 5, seconds(10)));
  for (int i = 0; i < 1000; ++i) {
    auto d = limiter.Check(Key(i));
    ASSERT_TRUE(d.ok() && d->allowed) << i;
    ASSERT_LE(store.size(), 64u);
  }
  EXPECT_GT(store.size(), 32u);  // each of the 4 shards holds up to its 16 keys
  EXPECT_EQ(store.memory_stats().evicted_lru, 1000u - store.size());
}

// What max_memory counts: the slot arrays (a page, 64 slots of 64 bytes, to start with), keys
// whose composite form (1 + scope + key bytes) exceeds the 20 bytes a slot holds, and sliding_log
// entries (16 bytes each), each heap block as malloc takes it (8 bytes more, in 16s, at least 32).
TEST(MemoryStoreMemory, CountsSlotsLongKeysAndSlidingLogEntries) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_memory = size_t{1} << 20});
  const Limit gcra = MakeLimit(Algorithm::kGcra, 10, seconds(1));
  const Limit log = MakeLimit(Algorithm::kSlidingLog, 10, std::chrono::hours(1));
  const auto check = [&](const Limit& limit, std::string_view key) {
    auto d = store.Check({.scope = "api", .limit = &limit, .key = key});
    ASSERT_TRUE(d.ok() && d->allowed) << key;
  };
  const auto bytes = [&] { return store.memory_stats().bytes; };
  EXPECT_EQ(bytes(), 0u);
  EXPECT_EQ(store.memory_stats().max_bytes, size_t{1} << 20);
  check(gcra, "short");
  EXPECT_EQ(bytes(), 4096u);
  const std::string long_key(100, 'k');  // 104 bytes composed: a block of 112
  check(gcra, long_key);
  EXPECT_EQ(bytes(), 4096u + 112);
  check(log, "log");  // one entry: a block of 32
  EXPECT_EQ(bytes(), 4096u + 112 + 32);
  clock.Advance(seconds(1));
  check(log, "log");  // two: 48
  EXPECT_EQ(bytes(), 4096u + 112 + 48);
  clock.Advance(seconds(1));
  check(log, "log");  // room for four: 80
  EXPECT_EQ(bytes(), 4096u + 112 + 80);
  ASSERT_TRUE(store.Reset("api", "log").ok());
  EXPECT_EQ(bytes(), 4096u + 112);
  ASSERT_TRUE(store.Reset("api", long_key).ok());
  EXPECT_EQ(bytes(), 4096u);
  // 4/5 of the slots hold keys (51 of 64); beyond, the array doubles (the old one is given back),
  // and the move drops the states back to fresh ("short" is, two seconds on).
  for (int i = 0; i < 51; ++i) check(gcra, Key(i));
  EXPECT_EQ(store.size(), 51u);
  EXPECT_EQ(bytes(), 8192u);
  EXPECT_EQ(store.memory_stats().keys, 51u);
  EXPECT_EQ(store.memory_stats().evicted_fresh, 1u);
}

// Keys whose states are back to fresh before they come back (10 per second: a state lasts 100 ms;
// a key comes back every 400 ms): while the budget allows, the table grows to hold them all rather
// than dropping the expired states to make room, so that a key coming back finds its slot and
// takes it over in place instead of being inserted again (an expired state decides as none).
TEST(MemoryStoreMemory, KeysThatComeBackAfterExpiringKeepTheirSlotsWhileTheBudgetAllows) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .shards = 1});
  Limiter limiter(store, "api", MakeLimit(Algorithm::kGcra, 10, seconds(1)));
  constexpr int kKeys = 200;
  const auto round = [&] {
    for (int i = 0; i < kKeys; ++i) {
      clock.Advance(milliseconds(2));
      auto d = limiter.Check(Key(i));
      ASSERT_TRUE(d.ok() && d->allowed) << i;
      EXPECT_EQ(d->remaining, 9) << i;  // the expired state decided as none
    }
  };
  for (int r = 0; r < 3; ++r) round();
  const StoreMemoryStats warm = store.memory_stats();
  EXPECT_EQ(warm.keys, static_cast<size_t>(kKeys));
  for (int r = 0; r < 3; ++r) round();
  const StoreMemoryStats after = store.memory_stats();
  EXPECT_EQ(after.evicted_fresh, warm.evicted_fresh);  // no key dropped and inserted again
  EXPECT_EQ(after.evicted_lru, 0u);
  EXPECT_EQ(after.keys, static_cast<size_t>(kKeys));
  EXPECT_EQ(after.bytes, warm.bytes);
  EXPECT_EQ(store.Sweep(), static_cast<size_t>(kKeys - 50));  // the last 100 ms: 50 keys fresh
}

// A long flood of distinct keys on a table of thousands of slots: evictions are spread over the
// array, so its runs stay short and every new key finds room (evicting a stretch of neighbouring
// slots at a time crowded the rest into runs too long to insert into).
TEST(MemoryStoreMemory, ALongFloodKeepsFindingRoom) {
  ManualClock clock;
  MemoryStore store(
      MemoryStoreOptions{.clock = &clock, .max_memory = size_t{1} << 20, .shards = 1});
  Limiter flood(store, "flood", MakeLimit(Algorithm::kGcra, 10, std::chrono::hours(1)));
  for (int i = 0; i < 200'000; ++i) {
    auto d = flood.Check(Key(i));
    ASSERT_TRUE(d.ok() && d->allowed) << i << " " << d.status().ToString();
  }
  EXPECT_GT(store.memory_stats().evicted_lru, 180'000u);
}

// A flood of new keys, long ones and sliding_log entries included, never takes the store past
// max_memory, and the keys in use keep their exact counts.
TEST(MemoryStoreMemory, AFloodOfNewKeysStaysWithinMaxMemory) {
  ManualClock clock;
  constexpr size_t kMaxMemory = size_t{64} << 10;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_memory = kMaxMemory});
  Limiter flood(store, "flood", MakeLimit(Algorithm::kSlidingLog, 10, std::chrono::hours(1)));
  Limiter clients(store, "clients",
                  MakeLimit(Algorithm::kFixedWindow, 100'000, std::chrono::hours(1)));
  std::vector<int64_t> checks(4, 0);
  size_t peak = 0;
  for (int i = 0; i < 20'000; ++i) {
    // Every third key is long enough to be held out of line.
    const std::string key = i % 3 ? Key(i) : std::string(40, 'x') + Key(i);
    auto d = flood.Check(key);
    ASSERT_TRUE(d.ok() && d->allowed) << i << " " << d.status().ToString();
    peak = std::max(peak, store.memory_stats().bytes);
    ASSERT_LE(store.memory_stats().bytes, kMaxMemory) << i;
    if (i % 16 == 0) {
      for (size_t c = 0; c < checks.size(); ++c) {
        auto client = clients.Check(Key(static_cast<int>(c)));
        ASSERT_TRUE(client.ok() && client->allowed);
        EXPECT_EQ(client->remaining, 100'000 - ++checks[c]) << "client " << c;
      }
    }
  }
  const StoreMemoryStats stats = store.memory_stats();
  EXPECT_GT(stats.evicted_lru, 15'000u);
  EXPECT_EQ(stats.evicted_fresh, 0u);
  EXPECT_GT(peak, kMaxMemory / 2);  // the bound, not something smaller, is what held it
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

using namespace std::chrono_literals;

// CheckAll over limits on one key and on several keys, against the all-or-nothing reference.
TEST(MemoryStoreCheckAll, IsAllOrNothingAcrossKeys) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit per_second = *Limit::Create(Algorithm::kGcra, 2, 1s);
  const Limit per_ten = *Limit::Create(Algorithm::kFixedWindow, 5, 10s);
  const Limit logged = *Limit::Create(Algorithm::kSlidingLog, 4, 3s);
  const Limit window = *Limit::Create(Algorithm::kSlidingWindow, 6, 2s);
  const Limit tokens = *Limit::Create(Algorithm::kTokenBucket, 3, 1s, 2);
  const Limit leaky = *Limit::Create(Algorithm::kLeakyBucket, 3, 2s);
  testing::AllOrNothingModel model;
  std::mt19937_64 rng(5);
  int admitted = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    clock.Advance(Duration(rng() % 400'000));
    std::vector<CheckRequest> requests = {
        {.scope = "second", .limit = &per_second, .key = "user"},
        {.scope = "ten", .limit = &per_ten, .key = "user"},
        {.scope = "log", .limit = &logged, .key = "user"},
        {.scope = "window", .limit = &window, .key = "route"},
        {.scope = "tokens", .limit = &tokens, .key = "route"},
        {.scope = "leaky", .limit = &leaky, .key = "client"},
    };
    std::shuffle(requests.begin(), requests.end(), rng);
    requests.resize(1 + rng() % requests.size());
    for (auto& r : requests) r.cost = static_cast<int64_t>(rng() % 3);
    const auto expected = model.CheckAll(requests, clock.now().time_since_epoch().count());
    const auto got = store.CheckAll(requests);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), requests.size());
    bool all = true;
    for (size_t j = 0; j < requests.size(); ++j) {
      EXPECT_EQ((*got)[j], expected[j]) << "call " << i << " limit " << requests[j].scope;
      all = all && (*got)[j].allowed;
    }
    (all ? admitted : refused)++;
  }
  EXPECT_GT(admitted, 200);
  EXPECT_GT(refused, 200);
}

TEST(MemoryStoreCheckAll, RefusesWhatItCannotDecideAndChangesNothing) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Limit limit = *Limit::Create(Algorithm::kGcra, 5, 1s);
  const CheckRequest twice[] = {{.scope = "a", .limit = &limit, .key = "k"},
                                {.scope = "a", .limit = &limit, .key = "k"}};
  EXPECT_EQ(store.CheckAll(twice).status().code(), StatusCode::kInvalidArgument);
  const CheckRequest booking[] = {
      {.scope = "a", .limit = &limit, .key = "k", .max_delay = Duration(1000)}};
  EXPECT_EQ(store.CheckAll(booking).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CheckAll({}).status().code(), StatusCode::kInvalidArgument);
  const CheckRequest too_costly[] = {{.scope = "a", .limit = &limit, .key = "k"},
                                     {.scope = "b", .limit = &limit, .key = "k", .cost = 6}};
  EXPECT_EQ(store.CheckAll(too_costly).status().code(), StatusCode::kCostExceedsLimit);
  std::vector<CheckRequest> many(kMaxCheckAll + 1, {.scope = "a", .limit = &limit, .key = ""});
  std::vector<std::string> keys(many.size());
  for (size_t i = 0; i < many.size(); ++i) many[i].key = keys[i] = "k" + std::to_string(i);
  EXPECT_EQ(store.CheckAll(many).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.size(), 0u);
}

// A full store refuses a CheckAll that would add a key, and writes none of its states.
TEST(MemoryStoreCheckAll, AFullStoreRefusesTheWholeCall) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 1, .shards = 1});
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 5, 1s);
  ASSERT_TRUE(store.Check({.scope = "a", .limit = &limit, .key = "held"})->allowed);
  const CheckRequest both[] = {{.scope = "a", .limit = &limit, .key = "held"},
                               {.scope = "a", .limit = &limit, .key = "new"}};
  EXPECT_EQ(store.CheckAll(both).status().code(), StatusCode::kResourceExhausted);
  // "held" was not charged by the refused call: 4 remain after this one.
  EXPECT_EQ(store.Check({.scope = "a", .limit = &limit, .key = "held"})->remaining, 3);
}

// At the bound, a CheckAll's new keys make room by evicting other keys, never its own.
TEST(MemoryStoreCheckAll, AtTheBoundEvictsOtherKeysNeverItsOwn) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 8, .shards = 1});
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 5, 1h);
  const auto check = [&](std::string_view key) {
    return store.Check({.scope = "a", .limit = &limit, .key = key});
  };
  for (const char* key : {"mine1", "mine2", "x1", "x2", "x3", "x4", "x5", "x6"}) {
    ASSERT_TRUE(check(key)->allowed);
  }
  const CheckRequest all[] = {{.scope = "a", .limit = &limit, .key = "mine1"},
                              {.scope = "a", .limit = &limit, .key = "mine2"},
                              {.scope = "a", .limit = &limit, .key = "new1"},
                              {.scope = "a", .limit = &limit, .key = "new2"}};
  auto got = store.CheckAll(all);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const Decision& d : *got) EXPECT_TRUE(d.allowed);
  EXPECT_EQ(store.memory_stats().evicted_lru, 3u);  // down to 7/8 of the bound, then two more
  EXPECT_EQ(store.size(), 7u);
  EXPECT_EQ(check("mine1")->remaining, 2);
  EXPECT_EQ(check("mine2")->remaining, 2);
  EXPECT_EQ(check("new1")->remaining, 3);
  EXPECT_EQ(check("new2")->remaining, 3);
}

}  // namespace
}  // namespace sluice
