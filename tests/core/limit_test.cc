#include "sluice/limit.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string ErrorOf(Result<Limit> r) {
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(Limit, RejectsNonsenseWithAClearMessage) {
  EXPECT_EQ(ErrorOf(Limit::Create(Algorithm::kGcra, 0, seconds(1))),
            "limit must be positive, got 0");
  EXPECT_EQ(ErrorOf(Limit::Create(Algorithm::kGcra, -3, seconds(1))),
            "limit must be positive, got -3");
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kGcra, Limit::kMaxCount + 1, hours(1)))
                .find("above the maximum"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kFixedWindow, 1, microseconds(999))).find("period"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kFixedWindow, 1, hours(24 * 367))).find("period"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kFixedWindow, 1, seconds(-1))).find("period"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kFixedWindow, 5, seconds(1), 5)).find("burst"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kGcra, 5, seconds(1), 0)).find("burst"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kTokenBucket, 2'000, milliseconds(1))).find("rate"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kSlidingLog, 100'001, seconds(1))).find("sliding_log"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Limit::Create(Algorithm::kGcra, 1, hours(24 * 365), 2)).find("366 days"),
            std::string::npos);
}

TEST(Limit, BurstOnlyForTheBucketAlgorithms) {
  for (Algorithm a : kAllAlgorithms) {
    auto limit = Limit::Create(a, 5, seconds(1), 10);
    if (IsMeter(a)) {
      ASSERT_TRUE(limit.ok()) << AlgorithmName(a);
      EXPECT_EQ(limit->capacity(), 10);
      EXPECT_EQ(ErrorOf(Limit::Create(a, 5, seconds(1), -1)), "burst must be positive, got -1");
      EXPECT_EQ(ErrorOf(Limit::Create(a, 5, seconds(1), 0)), "burst must be positive, got 0");
      EXPECT_EQ(ErrorOf(Limit::Create(a, 1'001, milliseconds(1))),
                "rate above one unit per microsecond: 1001 per 1000us");
    } else {
      EXPECT_EQ(ErrorOf(std::move(limit)),
                "burst applies to token_bucket, leaky_bucket and gcra, not " +
                    std::string(AlgorithmName(a)));
      // The window algorithms have no emission interval, so no rate bound.
      EXPECT_TRUE(Limit::Create(a, 1'001, milliseconds(1)).ok()) << AlgorithmName(a);
    }
  }
}

TEST(Limit, AcceptsTheBoundsThemselves) {
  for (Algorithm a : kAllAlgorithms) {
    EXPECT_TRUE(Limit::Create(a, 1, milliseconds(1)).ok()) << AlgorithmName(a);
    EXPECT_TRUE(Limit::Create(a, 1, Limit::kMaxPeriod).ok()) << AlgorithmName(a);
  }
  EXPECT_TRUE(Limit::Create(Algorithm::kGcra, Limit::kMaxCount, hours(1)).ok());
  EXPECT_TRUE(Limit::Create(Algorithm::kSlidingLog, Limit::kMaxSlidingLogCount, hours(1)).ok());
  EXPECT_TRUE(Limit::Create(Algorithm::kTokenBucket, 1'000, milliseconds(1)).ok());  // 1 per µs
}

TEST(Limit, CapacityAndEmissionInterval) {
  auto window = Limit::Create(Algorithm::kSlidingWindow, 100, seconds(60));
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->capacity(), 100);

  auto gcra = Limit::Create(Algorithm::kGcra, 3, seconds(10), 7);
  ASSERT_TRUE(gcra.ok());
  EXPECT_EQ(gcra->capacity(), 7);
  EXPECT_EQ(gcra->emission_interval(), microseconds(3'333'334));  // rounded up

  auto bucket = Limit::Create(Algorithm::kTokenBucket, 10, seconds(1));
  ASSERT_TRUE(bucket.ok());
  EXPECT_EQ(bucket->capacity(), 10);  // burst defaults to the limit
  EXPECT_EQ(bucket->emission_interval(), milliseconds(100));
}

TEST(Algorithm, NamesRoundTrip) {
  for (Algorithm a : kAllAlgorithms) {
    auto parsed = ParseAlgorithm(AlgorithmName(a));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, a);
  }
  auto bad = ParseAlgorithm("leaky");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown algorithm 'leaky'"), std::string::npos);
}

TEST(Status, ToString) {
  EXPECT_EQ(Status().ToString(), "OK");
  EXPECT_EQ(Status::Unavailable("redis down").ToString(), "UNAVAILABLE: redis down");
}

}  // namespace
}  // namespace sluice
