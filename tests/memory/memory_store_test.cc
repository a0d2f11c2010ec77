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

TEST(MemoryStoreBound, AtMaxKeysNewKeysAreRefusedAndOldOnesKeepWorking) {
  ManualClock clock;
  // One shard, so the bound is exactly max_keys (it is split evenly over shards).
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 64, .shards = 1});
  Limiter limiter(store, "api", MakeLimit(Algorithm::kFixedWindow, 5, seconds(10)));
  int refused = 0, admitted = 0;
  for (int i = 0; i < 200; ++i) {
    auto d = limiter.Check(Key(i));
    if (d.ok()) {
      ++admitted;
    } else {
      ASSERT_EQ(d.status().code(), StatusCode::kResourceExhausted);
      EXPECT_NE(d.status().message().find("memory store is full"), std::string::npos);
      ++refused;
    }
  }
  EXPECT_EQ(store.size(), 64u);
  EXPECT_EQ(admitted, 64);
  EXPECT_EQ(refused, 136);
  // Keys already held keep being decided, and a peek of an unknown key needs no room.
  for (int i = 0; i < 64; ++i) {
    auto d = limiter.Check(Key(i));
    ASSERT_TRUE(d.ok()) << i;
    EXPECT_EQ(d->remaining, 3);
  }
  EXPECT_TRUE(limiter.Check(Key(500), 0).ok());
  // Once the window passes the states are fresh, and room comes back, up to the bound again.
  clock.Advance(seconds(10));
  for (int i = 1000; i < 1064; ++i) {
    auto d = limiter.Check(Key(i));
    ASSERT_TRUE(d.ok()) << i << " " << d.status().ToString();
  }
  EXPECT_EQ(limiter.Check(Key(2000)).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.size(), 64u);
}

TEST(MemoryStoreBound, ShardedStoreNeverHoldsMoreThanMaxKeys) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_keys = 64, .shards = 4});
  Limiter limiter(store, "api", MakeLimit(Algorithm::kGcra, 5, seconds(10)));
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) admitted += limiter.Check(Key(i)).ok();
  EXPECT_LE(store.size(), 64u);
  EXPECT_EQ(static_cast<size_t>(admitted), store.size());
  EXPECT_GT(admitted, 32);  // each of the 4 shards fills its 16 slots with enough keys
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

}  // namespace
}  // namespace sluice
