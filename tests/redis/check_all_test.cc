// Store::CheckAll on RedisStore against the reference model (tests/support/all_or_nothing_model.h)
// on every target: one Redis, and a Redis Cluster where the keys of one call land on different
// masters, and on one master in different slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sluice/redis_store.h"
#include "store_test_support.h"
#include "support/all_or_nothing_model.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

using RedisCheckAll = RedisStoreTest;

TEST_F(RedisCheckAll, IsAllOrNothingOnEveryNode) {
  ManualClock clock;
  auto store = MakeStore({.clock = &clock, .expiry_margin = 10min});
  ASSERT_NE(store, nullptr);
  // keys[i] on node i % nodes: with 3 masters, "user" and "neighbour" share one (in two slots),
  // "route" and "client" have one each.
  const std::vector<std::string> keys = KeysOnEveryNode(*target_, "k", 4);
  ASSERT_EQ(keys.size(), 4u);
  const std::string &user = keys[0], &route = keys[1], &client = keys[2], &neighbour = keys[3];
  const Limit per_second = *Limit::Create(Algorithm::kGcra, 2, 1s);
  const Limit per_ten = *Limit::Create(Algorithm::kFixedWindow, 5, 10s);
  const Limit logged = *Limit::Create(Algorithm::kSlidingLog, 4, 3s);
  const Limit window = *Limit::Create(Algorithm::kSlidingWindow, 6, 2s);
  const Limit tokens = *Limit::Create(Algorithm::kTokenBucket, 3, 1s, 2);
  const Limit leaky = *Limit::Create(Algorithm::kLeakyBucket, 3, 2s);
  AllOrNothingModel model;
  std::mt19937_64 rng(3);
  int admitted = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    clock.Advance(Duration(rng() % 400'000));
    // Limits on one key (one tenant's), and on other keys (one per descriptor of a request).
    std::vector<CheckRequest> requests = {
        {.scope = "second", .limit = &per_second, .key = user, .cost = 1},
        {.scope = "ten", .limit = &per_ten, .key = user, .cost = 1},
        {.scope = "log", .limit = &logged, .key = user, .cost = 1},
        {.scope = "window", .limit = &window, .key = route, .cost = 1},
        {.scope = "tokens", .limit = &tokens, .key = route, .cost = 1},
        {.scope = "leaky", .limit = &leaky, .key = client, .cost = 1},
        {.scope = "neighbour", .limit = &logged, .key = neighbour, .cost = 1},
    };
    std::shuffle(requests.begin(), requests.end(), rng);
    requests.resize(1 + rng() % requests.size());
    for (auto& r : requests) r.cost = static_cast<int64_t>(rng() % 3);
    const auto expected = model.CheckAll(requests, clock.now().time_since_epoch().count());
    const auto got = store->CheckAll(requests);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), requests.size());
    bool all = true;
    for (size_t j = 0; j < requests.size(); ++j) {
      EXPECT_EQ((*got)[j], expected[j]) << "call " << i << " limit " << requests[j].scope;
      all = all && (*got)[j].allowed;
    }
    (all ? admitted : refused)++;
  }
  // The trace exercises both outcomes, on every node.
  EXPECT_GT(admitted, 20);
  EXPECT_GT(refused, 20);
  ExpectKeysOnEveryNode(*target_, prefix_ + "*");
}

}  // namespace
}  // namespace sluice::testing
