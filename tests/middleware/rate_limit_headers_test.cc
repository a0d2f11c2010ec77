#include "middleware/rate_limit_headers.h"

#include <gtest/gtest.h>

namespace sluice::middleware {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

Limit MakeLimit(int64_t count, Duration period) {
  return Limit::Create(Algorithm::kGcra, count, period).value();
}

// A decision whose next unit comes back after `replenish_after`; the whole quota only at the
// end of the hour, which the headers never state.
Decision Allowed(int64_t remaining, Duration replenish_after) {
  return Decision{.allowed = true,
                  .limit = 100,
                  .remaining = remaining,
                  .reset_after = std::chrono::hours(1),
                  .replenish_after = replenish_after};
}

TEST(RateLimitHeadersTest, PolicyStatesQuotaAndWindowInSeconds) {
  EXPECT_EQ(RateLimitPolicyValue("api", MakeLimit(100, std::chrono::minutes(1))),
            R"("api";q=100;w=60)");
  EXPECT_EQ(RateLimitPolicyValue("api", MakeLimit(5, seconds(90))), R"("api";q=5;w=90)");
  // A window that is not whole seconds is rounded up: the advertised rate is never above the
  // real one.
  EXPECT_EQ(RateLimitPolicyValue("fast", MakeLimit(10, milliseconds(500))), R"("fast";q=20;w=1)");
  // 3/s: the window is period × count / count exactly, not three emission intervals rounded up to
  // 333334 us each (1.000002 s, which would round up to w=2).
  EXPECT_EQ(RateLimitPolicyValue("third", MakeLimit(3, seconds(1))), R"("third";q=3;w=1)");
  const auto window = [](Algorithm algorithm, int64_t count, Duration period) {
    return RateLimitPolicyValue("w", Limit::Create(algorithm, count, period).value());
  };
  EXPECT_EQ(window(Algorithm::kFixedWindow, 20, std::chrono::hours(1)), R"("w";q=20;w=3600)");
  EXPECT_EQ(window(Algorithm::kSlidingWindow, 5, std::chrono::minutes(15)), R"("w";q=5;w=900)");
  EXPECT_EQ(window(Algorithm::kSlidingLog, 5, milliseconds(10'500)), R"("w";q=5;w=11)");
}

Limit WithBurst(Algorithm algorithm, int64_t count, Duration period, int64_t burst) {
  return Limit::Create(algorithm, count, period, burst).value();
}

// The window of a bucket is the time its burst takes to refill, burst × period / count rounded up
// to whole seconds, and the quota what refills in it: at least the burst, which is what `r`
// counts down from, and never more than the real rate allows.
TEST(RateLimitHeadersTest, BucketPolicyStatesTheBurstAndItsRefillTime) {
  const auto per_minute = std::chrono::minutes(1);
  EXPECT_EQ(RateLimitPolicyValue("api", WithBurst(Algorithm::kGcra, 100, per_minute, 20)),
            R"("api";q=20;w=12)");
  EXPECT_EQ(RateLimitPolicyValue("search", WithBurst(Algorithm::kTokenBucket, 10, seconds(1), 50)),
            R"("search";q=50;w=5)");
  EXPECT_EQ(RateLimitPolicyValue("drip", WithBurst(Algorithm::kLeakyBucket, 10, seconds(1), 1)),
            R"("drip";q=10;w=1)");  // not q=1;w=1: a tenth of the rate
  // 7 units refill in 4.2 s, rounded up to 5 s, in which 8.33 units refill: 8 per 5 s understates
  // 100/min rather than overstating it.
  EXPECT_EQ(RateLimitPolicyValue("api", WithBurst(Algorithm::kGcra, 100, per_minute, 7)),
            R"("api";q=8;w=5)");
  // A billion units over 366 days with a burst of 10^8: burst × period in microseconds does not
  // fit in 64 bits.
  const auto year = std::chrono::hours(24 * 366);
  EXPECT_EQ(
      RateLimitPolicyValue("big", WithBurst(Algorithm::kGcra, Limit::kMaxCount, year, 100'000'000)),
      R"("big";q=100000000;w=3162240)");
}

// draft-10: t is the seconds until additional quota is available, not until all of it is.
TEST(RateLimitHeadersTest, RateLimitStatesRemainingAndSecondsUntilMoreRoundedUp) {
  EXPECT_EQ(RateLimitValue("api", Allowed(99, milliseconds(600))), R"("api";r=99;t=1)");
  EXPECT_EQ(RateLimitValue("api", Allowed(100, Duration(0))), R"("api";r=100;t=0)");
  EXPECT_EQ(RateLimitValue("api", Allowed(3, seconds(2))), R"("api";r=3;t=2)");
  EXPECT_EQ(RateLimitValue("api", Allowed(3, seconds(2) + microseconds(1))), R"("api";r=3;t=3)");
}

TEST(RateLimitHeadersTest, RetryAfterOnlyWhenDenied) {
  EXPECT_EQ(RetryAfterValue(Allowed(1, seconds(1))), "");
  Decision denied{.allowed = false, .limit = 1, .remaining = 0};
  denied.retry_after = milliseconds(1200);
  denied.replenish_after = milliseconds(1200);
  EXPECT_EQ(RetryAfterValue(denied), "2");
  denied.retry_after = seconds(1);
  denied.replenish_after = seconds(1);
  EXPECT_EQ(RetryAfterValue(denied), "1");
}

// draft-10, section 6: Retry-After never names a time earlier than t. A denial's retry_after can
// be shorter than replenish_after (a reservation refused for waiting longer than it would: its
// retry_after is the wait beyond max_delay).
TEST(RateLimitHeadersTest, RetryAfterIsNeverEarlierThanT) {
  Decision denied{.allowed = false,
                  .limit = 10,
                  .remaining = 0,
                  .retry_after = seconds(1),
                  .reset_after = seconds(30),
                  .replenish_after = milliseconds(3500)};
  EXPECT_EQ(RateLimitValue("p", denied), R"("p";r=0;t=4)");
  EXPECT_EQ(RetryAfterValue(denied), "4");
  denied.retry_after = milliseconds(2500);
  denied.replenish_after = seconds(1);
  EXPECT_EQ(RateLimitValue("p", denied), R"("p";r=0;t=1)");
  EXPECT_EQ(RetryAfterValue(denied), "3");
}

TEST(RateLimitHeadersTest, FormatsAllThreeAtOnce) {
  const Decision denied{.allowed = false,
                        .limit = 1,
                        .remaining = 0,
                        .retry_after = milliseconds(2500),
                        .reset_after = seconds(10),
                        .replenish_after = milliseconds(2500)};
  EXPECT_EQ(RateLimitPolicyValue("login", MakeLimit(1, seconds(10))), R"("login";q=1;w=10)");
  EXPECT_EQ(RateLimitValue("login", denied), R"("login";r=0;t=3)");
  EXPECT_EQ(RetryAfterValue(denied), "3");
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
}  // namespace sluice::middleware
