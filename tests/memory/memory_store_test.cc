#include "sluice/memory_store.h"

#include <gtest/gtest.h>

#include <string>

#include "sluice/limiter.h"

namespace sluice {
namespace {

using std::chrono::seconds;

std::string Key(int i) { return std::string("k").append(std::to_string(i)); }

Limit MakeLimit(Algorithm a, int64_t count, Duration period) {
  auto limit = Limit::Create(a, count, period);
  EXPECT_TRUE(limit.ok());
  return *limit;
}

class MemoryStoreTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_, .max_keys = 64, .shards = 4}};
};

TEST_F(MemoryStoreTest, BadInputIsRefusedAndChangesNothing) {
  Limiter limiter(store_, "api", MakeLimit(Algorithm::kFixedWindow, 3, seconds(10)));
  const std::string long_key(kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(limiter.Check("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.Check(long_key).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.Check("k", -1).status().code(), StatusCode::kInvalidArgument);
  auto too_big = limiter.Check("k", 4);
  EXPECT_EQ(too_big.status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_NE(too_big.status().message().find("can never be admitted"), std::string::npos);
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_EQ(limiter.Check("k", 3)->remaining, 0);  // the whole quota is still there
  EXPECT_TRUE(limiter.Check(std::string(kMaxKeyBytes, 'k')).ok());
}

TEST_F(MemoryStoreTest, BatchDecidesInOrderAroundBadEntries) {
  Limiter limiter(store_, "api", MakeLimit(Algorithm::kGcra, 2, seconds(10)));
  const KeyCost checks[] = {{"a", 1}, {"", 1}, {"a", 1}, {"a", 1}, {"b", -2}, {"b", 2}};
  auto results = limiter.CheckBatch(checks);
  ASSERT_EQ(results.size(), 6u);
  EXPECT_TRUE(results[0]->allowed);
  EXPECT_EQ(results[1].status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[2]->allowed);
  EXPECT_FALSE(results[3]->allowed);
  EXPECT_EQ(results[4].status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[5]->allowed);
}

TEST_F(MemoryStoreTest, AsyncAndBatchFormsAgreeWithSync) {
  for (Algorithm a : kAllAlgorithms) {
    ManualClock clock;
    MemoryStore sync_store(MemoryStoreOptions{.clock = &clock});
    MemoryStore async_store(MemoryStoreOptions{.clock = &clock});
    MemoryStore batch_store(MemoryStoreOptions{.clock = &clock});
    const Limit limit = MakeLimit(a, 3, seconds(1));
    Limiter sync(sync_store, "x", limit), async(async_store, "x", limit),
        batch(batch_store, "x", limit);
    for (int i = 0; i < 12; ++i) {
      clock.Advance(std::chrono::milliseconds(90));
      const int64_t cost = i % 3;
      Result<Decision> want = sync.Check("key", cost);
      Result<Decision> got_async = Status::Internal("not called");
      async.CheckAsync("key", cost, [&](Result<Decision> d) { got_async = std::move(d); });
      const KeyCost one[] = {{"key", cost}};
      Result<Decision> got_batch = batch.CheckBatch(one).front();
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(*got_async, *want) << AlgorithmName(a) << " step " << i;
      EXPECT_EQ(*got_batch, *want) << AlgorithmName(a) << " step " << i;
    }
  }
}

TEST_F(MemoryStoreTest, LimitersWithDifferentNamesDoNotShareState) {
  const Limit limit = MakeLimit(Algorithm::kFixedWindow, 1, seconds(10));
  Limiter login(store_, "login", limit), api(store_, "api", limit);
  EXPECT_TRUE(login.Check("user:1")->allowed);
  EXPECT_TRUE(api.Check("user:1")->allowed);
  EXPECT_FALSE(login.Check("user:1")->allowed);
  // Names and keys cannot be shifted into each other.
  Limiter a(store_, "a", limit), ab(store_, "ab", limit);
  EXPECT_TRUE(a.Check("bc")->allowed);
  EXPECT_TRUE(ab.Check("c")->allowed);
}

TEST_F(MemoryStoreTest, PeekCreatesNoKeyAndResetForgets) {
  Limiter limiter(store_, "api", MakeLimit(Algorithm::kTokenBucket, 2, seconds(10)));
  EXPECT_EQ(limiter.Check("k", 0)->remaining, 2);
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_TRUE(limiter.Check("k", 2)->allowed);
  EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_TRUE(limiter.Reset("k").ok());
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_TRUE(limiter.Check("k")->allowed);
  EXPECT_EQ(limiter.Reset("").code(), StatusCode::kInvalidArgument);
}

TEST_F(MemoryStoreTest, ExpiredKeysAreSwept) {
  Limiter limiter(store_, "api", MakeLimit(Algorithm::kGcra, 10, seconds(1)));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(limiter.Check(Key(i))->allowed);
  EXPECT_EQ(store_.size(), 20u);
  clock_.Advance(std::chrono::milliseconds(99));
  EXPECT_EQ(store_.Sweep(), 0u);
  clock_.Advance(std::chrono::milliseconds(1));  // one emission interval: every key is fresh
  EXPECT_EQ(store_.Sweep(), 20u);
  EXPECT_EQ(store_.size(), 0u);
}

TEST(MemoryStoreBound, AtMaxKeysNewKeysAreRefusedAndOldOnesKeepWorking) {
  ManualClock clock_;
  // One shard, so the bound is exactly max_keys (it is split evenly over shards).
  MemoryStore store_(MemoryStoreOptions{.clock = &clock_, .max_keys = 64, .shards = 1});
  Limiter limiter(store_, "api", MakeLimit(Algorithm::kFixedWindow, 5, seconds(10)));
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
  EXPECT_EQ(store_.size(), 64u);
  EXPECT_EQ(admitted, 64);
  EXPECT_EQ(refused, 136);
  int still_working = 0;
  for (int i = 0; i < 200; ++i) still_working += limiter.Check(Key(i)).ok();
  EXPECT_EQ(still_working, 64);
  // Once the window passes, the states are fresh again and room comes back.
  clock_.Advance(seconds(10));
  for (int i = 1000; i < 1064; ++i) {
    auto d = limiter.Check(Key(i));
    ASSERT_TRUE(d.ok()) << i << " " << d.status().ToString();
  }
}

}  // namespace
}  // namespace sluice
