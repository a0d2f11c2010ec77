// The hot-key cache on its own: a denial served only for the cost denied, under the limit it was
// made under, counted down until it passes; and its map's contract (what a swap of the map must
// keep): entries die at their expiry or under another limit, and a full shard makes room by
// dropping expired entries first, then those not looked up lately.
#include "resilience/hot_key_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/scoped_key.h"
#include "resilience/hot_key_map.h"

namespace sluice::resilience {
namespace {

using namespace std::chrono_literals;

Limit MakeLimit(int64_t count) {
  auto limit = Limit::Create(Algorithm::kFixedWindow, count, 10s);
  EXPECT_TRUE(limit.ok());
  return *limit;
}

class HotKeyCacheTest : public ::testing::Test {
 protected:
  CheckRequest Request(const Limit& limit, int64_t cost) const {
    return {.scope = "api", .limit = &limit, .key = "k", .cost = cost};
  }

  ManualClock clock_;
  const Limit limit_ = MakeLimit(5);
  HotKeyCache cache_{100};
  const Decision denial_{.allowed = false,
                         .limit = 5,
                         .remaining = 1,
                         .retry_after = 2s,
                         .reset_after = 3s,
                         .replenish_after = 1s};
};

TEST_F(HotKeyCacheTest, DeniesTheCostDeniedCountingDownUntilItPasses) {
  EXPECT_FALSE(cache_.Deny(Request(limit_, 2), clock_.now()).has_value());
  cache_.Remember(Request(limit_, 2), clock_.now(), denial_);
  clock_.Advance(500ms);
  const auto d = cache_.Deny(Request(limit_, 2), clock_.now());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, (Decision{.allowed = false,
                          .limit = 5,
                          .remaining = 1,
                          .retry_after = 1500ms,
                          .reset_after = 2500ms,
                          .replenish_after = 500ms,
                          .source = DecisionSource::kHotKeyCache}));
  EXPECT_FALSE(cache_.Deny(Request(limit_, 1), clock_.now()).has_value());
  EXPECT_FALSE(cache_.Deny(Request(limit_, 3), clock_.now()).has_value());

  clock_.Advance(1500ms);  // retry_after has passed
  EXPECT_FALSE(cache_.Deny(Request(limit_, 2), clock_.now()).has_value());
}

TEST_F(HotKeyCacheTest, ADenialUnderAnotherLimitIsDropped) {
  cache_.Remember(Request(limit_, 1), clock_.now(), denial_);
  const Limit raised = MakeLimit(6);
  EXPECT_FALSE(cache_.Deny(Request(raised, 1), clock_.now()).has_value());
  EXPECT_FALSE(cache_.Deny(Request(limit_, 1), clock_.now()).has_value());  // gone
}

TEST_F(HotKeyCacheTest, ForgetAndReservations) {
  cache_.Remember(Request(limit_, 1), clock_.now(), denial_);
  cache_.Forget("api", "k");
  EXPECT_FALSE(cache_.Deny(Request(limit_, 1), clock_.now()).has_value());
  CheckRequest reservation = Request(limit_, 1);
  reservation.max_delay = 1s;
  EXPECT_FALSE(HotKeyCache::Serves(reservation));
  EXPECT_TRUE(HotKeyCache::Serves(Request(limit_, 1)));
}

TEST(HotKeyMap, AFullShardDropsExpiredEntriesThenThoseNotLookedUpLately) {
  // Three keys of one shard, found among bounded candidates.
  std::vector<std::string> keys;
  size_t shard = 0;
  for (int i = 0; i < 10'000 && keys.size() < 3; ++i) {
    const std::string key = "k" + std::to_string(i);
    const size_t s = base::ShardIndex(base::ScopedKey("api", key).hash, HotKeyMap::kShards);
    if (keys.empty()) shard = s;
    if (s == shard) keys.push_back(key);
  }
  ASSERT_EQ(keys.size(), 3u);

  ManualClock clock;
  const Limit limit = MakeLimit(1);
  const auto entry = [&](Duration lasts) {
    return HotKeyEntry{.limit = limit,
                       .cost = 1,
                       .denied_until = clock.now() + lasts,
                       .fresh_at = clock.now() + lasts,
                       .replenish_at = clock.now() + lasts};
  };
  HotKeyMap map(2 * HotKeyMap::kShards);  // two keys per shard
  map.Put("api", keys[0], entry(4ms), clock.now());
  map.Put("api", keys[1], entry(4ms), clock.now());
  EXPECT_TRUE(map.Find("api", keys[0], clock.now(), limit).has_value());  // looked up lately
  map.Put("api", keys[2], entry(4ms), clock.now());  // full, nothing expired: keys[1] goes
  EXPECT_EQ(map.evicted(), 1u);
  EXPECT_TRUE(map.Find("api", keys[0], clock.now(), limit).has_value());
  EXPECT_FALSE(map.Find("api", keys[1], clock.now(), limit).has_value());
  EXPECT_TRUE(map.Find("api", keys[2], clock.now(), limit).has_value());
  EXPECT_EQ(map.size(), 2u);

  clock.Advance(5ms);  // both expired: they make room, and nothing live is evicted
  map.Put("api", keys[1], entry(4ms), clock.now());
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(map.evicted(), 1u);
  EXPECT_TRUE(map.Find("api", keys[1], clock.now(), limit).has_value());

  map.Put("api", keys[1], entry(8ms), clock.now());  // a known key is replaced
  clock.Advance(6ms);
  EXPECT_TRUE(map.Find("api", keys[1], clock.now(), limit).has_value());
  map.Erase("api", keys[1]);
  EXPECT_FALSE(map.Find("api", keys[1], clock.now(), limit).has_value());
  EXPECT_EQ(map.size(), 0u);
}

}  // namespace
}  // namespace sluice::resilience
