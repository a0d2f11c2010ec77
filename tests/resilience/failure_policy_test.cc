// The failure policies on their own: what each decides for one request, the local fallback's
// share of a limit, and CheckAll's requests decided all or nothing, the local fallback consuming
// only when every request admits.
#include "resilience/failure_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace sluice::resilience {
namespace {

using namespace std::chrono_literals;

Limit MakeLimit(Algorithm algorithm, int64_t count, Duration period,
                std::optional<int64_t> burst = std::nullopt) {
  auto limit = Limit::Create(algorithm, count, period, burst);
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

class FailurePoliciesTest : public ::testing::Test {
 protected:
  CheckRequest Request(std::string_view key, FailurePolicy policy, int64_t cost = 1) const {
    return {.scope = "api", .limit = &limit_, .key = key, .cost = cost, .on_error = policy};
  }
  // How many of `n` requests for `key` the local fallback admits.
  int LocallyAdmitted(std::string_view key, int n) {
    int admitted = 0;
    for (int i = 0; i < n; ++i) {
      admitted += policies_.Decide(Request(key, FailurePolicy::kLocalFallback)).allowed;
    }
    return admitted;
  }

  ManualClock clock_;
  FailurePolicies policies_{ResilientStoreOptions{.open_for = 500ms, .instances = 4}, clock_};
  const Limit limit_ = MakeLimit(Algorithm::kFixedWindow, 8, 10s);
};

TEST(LocalShare, DividesTheCountAndABurstAmongTheInstancesAtLeastOneEach) {
  auto window = LocalShare(MakeLimit(Algorithm::kFixedWindow, 10, 1s), 4);
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->count(), 2);
  EXPECT_EQ(window->period(), 1s);
  auto meter = LocalShare(MakeLimit(Algorithm::kTokenBucket, 100, 1s, 40), 4);
  ASSERT_TRUE(meter.ok());
  EXPECT_EQ(meter->count(), 25);
  EXPECT_EQ(meter->capacity(), 10);
  auto tiny = LocalShare(MakeLimit(Algorithm::kGcra, 3, 1s), 10);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->count(), 1);
  EXPECT_EQ(tiny->capacity(), 1);
}

TEST_F(FailurePoliciesTest, EachPolicyDecidesOneRequest) {
  const Decision open = policies_.Decide(Request("k", FailurePolicy::kFailOpen));
  EXPECT_TRUE(open.allowed);
  EXPECT_EQ(open.source, DecisionSource::kFailOpen);
  EXPECT_EQ(open.limit, 8);

  const Decision closed = policies_.Decide(Request("k", FailurePolicy::kFailClosed));
  EXPECT_FALSE(closed.allowed);
  EXPECT_EQ(closed.source, DecisionSource::kFailClosed);
  EXPECT_EQ(closed.retry_after, 500ms);

  // 8 among 4 instances: this one admits 2, and reports the rule's limit.
  const Decision local = policies_.Decide(Request("k", FailurePolicy::kLocalFallback));
  EXPECT_TRUE(local.allowed);
  EXPECT_EQ(local.source, DecisionSource::kLocalFallback);
  EXPECT_EQ(local.limit, 8);
  EXPECT_EQ(local.remaining, 1);
  EXPECT_EQ(LocallyAdmitted("k", 5), 1);
}

TEST_F(FailurePoliciesTest, ACostAboveTheLocalShareIsDeniedAsClosed) {
  const Decision d = policies_.Decide(Request("k", FailurePolicy::kLocalFallback, /*cost=*/3));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.source, DecisionSource::kLocalFallback);
  EXPECT_EQ(d.retry_after, 500ms);
  EXPECT_EQ(d.limit, 8);
}

TEST_F(FailurePoliciesTest, ForgetResetsTheLocalFallbacksKey) {
  EXPECT_EQ(LocallyAdmitted("k", 3), 2);
  policies_.Forget("api", "k");
  EXPECT_EQ(LocallyAdmitted("k", 3), 2);
}

TEST_F(FailurePoliciesTest, AllOrNothingAFailClosedRequestDeniesThemAll) {
  const std::vector<CheckRequest> requests = {Request("a", FailurePolicy::kFailOpen),
                                              Request("b", FailurePolicy::kLocalFallback),
                                              Request("c", FailurePolicy::kFailClosed)};
  const std::vector<Decision> all = policies_.DecideAll(requests);
  ASSERT_EQ(all.size(), 3u);
  for (const Decision& d : all) EXPECT_FALSE(d.allowed);
  EXPECT_EQ(all[0].source, DecisionSource::kFailOpen);
  EXPECT_EQ(all[1].source, DecisionSource::kLocalFallback);
  EXPECT_EQ(all[1].retry_after, 500ms);  // the local fallback was not asked
  EXPECT_EQ(all[2].source, DecisionSource::kFailClosed);
  EXPECT_EQ(all[2].retry_after, 500ms);
  EXPECT_EQ(LocallyAdmitted("b", 3), 2);  // nothing consumed
}

TEST_F(FailurePoliciesTest, AllOrNothingTheLocalFallbackConsumesOnlyWhenAllAdmit) {
  const std::vector<CheckRequest> requests = {Request("a", FailurePolicy::kLocalFallback),
                                              Request("b", FailurePolicy::kLocalFallback),
                                              Request("c", FailurePolicy::kFailOpen)};
  std::vector<Decision> all = policies_.DecideAll(requests);
  for (const Decision& d : all) EXPECT_TRUE(d.allowed);
  EXPECT_EQ(all[0].source, DecisionSource::kLocalFallback);
  EXPECT_EQ(all[0].remaining, 1);
  EXPECT_EQ(all[0].limit, 8);
  EXPECT_EQ(all[2].source, DecisionSource::kFailOpen);

  EXPECT_EQ(LocallyAdmitted("b", 1), 1);  // b's share is spent now
  all = policies_.DecideAll(requests);
  for (const Decision& d : all) EXPECT_FALSE(d.allowed);
  EXPECT_EQ(all[0].retry_after, 0s);  // a would have admitted: a peek's answer
  EXPECT_EQ(all[0].remaining, 1);
  EXPECT_GT(all[1].retry_after, 0s);      // b refused
  EXPECT_EQ(LocallyAdmitted("a", 3), 1);  // a's second unit was not consumed
}

}  // namespace
}  // namespace sluice::resilience
