#include "http/rate_limit_headers.h"

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

Limit MakeLimit(int64_t count, Duration period) {
  return Limit::Create(Algorithm::kGcra, count, period).value();
}

Decision Allowed(int64_t remaining, Duration reset_after) {
  return Decision{
      .allowed = true, .limit = 100, .remaining = remaining, .reset_after = reset_after};
}

TEST(RateLimitHeadersTest, PolicyStatesQuotaAndWindowInSeconds) {
  EXPECT_EQ(RateLimitPolicyValue("api", MakeLimit(100, std::chrono::minutes(1))),
            R"("api";q=100;w=60)");
  EXPECT_EQ(RateLimitPolicyValue("api", MakeLimit(5, seconds(90))), R"("api";q=5;w=90)");
  // A window that is not whole seconds is rounded up: the advertised rate is never above the
  // real one.
  EXPECT_EQ(RateLimitPolicyValue("fast", MakeLimit(10, milliseconds(500))), R"("fast";q=10;w=1)");
}

TEST(RateLimitHeadersTest, RateLimitStatesRemainingAndSecondsToResetRoundedUp) {
  EXPECT_EQ(RateLimitValue("api", Allowed(99, milliseconds(600))), R"("api";r=99;t=1)");
  EXPECT_EQ(RateLimitValue("api", Allowed(100, Duration(0))), R"("api";r=100;t=0)");
  EXPECT_EQ(RateLimitValue("api", Allowed(3, seconds(2))), R"("api";r=3;t=2)");
  EXPECT_EQ(RateLimitValue("api", Allowed(3, seconds(2) + microseconds(1))), R"("api";r=3;t=3)");
}

TEST(RateLimitHeadersTest, RetryAfterOnlyWhenDenied) {
  EXPECT_EQ(RetryAfterValue(Allowed(1, seconds(1))), "");
  Decision denied{.allowed = false, .limit = 1, .remaining = 0};
  denied.retry_after = milliseconds(1200);
  EXPECT_EQ(RetryAfterValue(denied), "2");
  denied.retry_after = seconds(1);
  EXPECT_EQ(RetryAfterValue(denied), "1");
}

TEST(RateLimitHeadersTest, FormatsAllThreeAtOnce) {
  const Decision denied{.allowed = false,
                        .limit = 1,
                        .remaining = 0,
                        .retry_after = milliseconds(2500),
                        .reset_after = seconds(10)};
  const RateLimitHeaders h = FormatRateLimitHeaders("login", MakeLimit(1, seconds(10)), denied);
  EXPECT_EQ(h.policy, R"("login";q=1;w=10)");
  EXPECT_EQ(h.rate_limit, R"("login";r=0;t=10)");
  EXPECT_EQ(h.retry_after, "3");
}

TEST(RateLimitHeadersTest, PolicyNameIsAValidStructuredFieldString) {
  EXPECT_EQ(RateLimitValue(R"(a"b\c)", Allowed(1, Duration(0))), R"("a\"b\\c";r=1;t=0)");
  EXPECT_EQ(RateLimitValue("caf\xc3\xa9\n", Allowed(1, Duration(0))), R"("caf???";r=1;t=0)");
}

TEST(RateLimitHeadersTest, CeilSeconds) {
  EXPECT_EQ(CeilSeconds(Duration(0)), 0);
  EXPECT_EQ(CeilSeconds(Duration(-5)), 0);
  EXPECT_EQ(CeilSeconds(microseconds(1)), 1);
  EXPECT_EQ(CeilSeconds(seconds(1)), 1);
  EXPECT_EQ(CeilSeconds(seconds(1) + microseconds(1)), 2);
}

}  // namespace
}  // namespace sluice::http
