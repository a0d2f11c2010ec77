// Limiter::Request, the one path from a limit to a check: what it builds is what the Limiter's
// own checks send, and the requests of several limiters handed to a store together are decided
// as their checks would be, sharing their state.
#include "sluice/limiter.h"

#include <gtest/gtest.h>

#include <vector>

#include "sluice/memory_store.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

Limit MakeLimit(Algorithm algorithm, int64_t count, Duration period) {
  auto limit = Limit::Create(algorithm, count, period);
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

class LimiterRequestTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
};

TEST_F(LimiterRequestTest, NamesTheLimitersScopeLimitAndPolicy) {
  const Limiter login(store_, "login", MakeLimit(Algorithm::kGcra, 2, 1s),
                      FailurePolicy::kFailClosed);
  const CheckRequest request = login.Request("user:1", 2, 100ms);
  EXPECT_EQ(request.scope, "login");
  EXPECT_EQ(request.limit, &login.limit());
  EXPECT_EQ(request.key, "user:1");
  EXPECT_EQ(request.cost, 2);
  EXPECT_EQ(request.on_error, FailurePolicy::kFailClosed);
  EXPECT_EQ(request.max_delay, 100ms);
  EXPECT_EQ(login.Request("user:1", 1).max_delay, Duration(0));
}

TEST_F(LimiterRequestTest, AStoreDecidingItSharesTheLimitersState) {
  const Limiter login(store_, "login", MakeLimit(Algorithm::kFixedWindow, 2, 1s));
  const auto direct = store_.Check(login.Request("user:1", 2));
  ASSERT_TRUE(direct.ok());
  EXPECT_TRUE(direct->allowed);
  const auto through_limiter = login.Check("user:1");
  ASSERT_TRUE(through_limiter.ok());
  EXPECT_FALSE(through_limiter->allowed);
}

TEST_F(LimiterRequestTest, SeveralLimitersRequestsAreDecidedTogetherByCheckAll) {
  const Limiter api(store_, "api", MakeLimit(Algorithm::kFixedWindow, 10, 1s));
  const Limiter login(store_, "login", MakeLimit(Algorithm::kFixedWindow, 1, 1s));
  const std::vector<CheckRequest> both = {api.Request("k", 1), login.Request("k", 1)};
  const auto first = store_.CheckAll(both);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE((*first)[0].allowed);
  EXPECT_TRUE((*first)[1].allowed);

  const auto second = store_.CheckAll(both);  // login is spent: nothing is consumed
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE((*second)[1].allowed);
  const auto api_left = api.Check("k", 0);
  ASSERT_TRUE(api_left.ok());
  EXPECT_EQ(api_left->remaining, 9);
}

}  // namespace
}  // namespace sluice
