#include "config/duration.h"

#include <gtest/gtest.h>

namespace sluice::config {
namespace {

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(*ParseDuration("250us"), Duration(250));
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("10s"), std::chrono::seconds(10));
  EXPECT_EQ(*ParseDuration("1m"), std::chrono::minutes(1));
  EXPECT_EQ(*ParseDuration("2h"), std::chrono::hours(2));
  EXPECT_EQ(*ParseDuration("1d"), std::chrono::hours(24));
  EXPECT_EQ(*ParseDuration("0s"), Duration(0));
  EXPECT_EQ(*ParseDuration("366d"), std::chrono::hours(24 * 366));
  EXPECT_EQ(*ParseDuration("1500ms"), std::chrono::microseconds(1'500'000));
}

TEST(ParseDuration, RejectsWithTheReason) {
  const auto message = [](std::string_view text) {
    auto r = ParseDuration(text);
    EXPECT_FALSE(r.ok()) << text;
    return r.status().message();
  };
  EXPECT_NE(message("10").find("missing unit"), std::string::npos);
  EXPECT_NE(message("10x").find("unknown unit 'x'"), std::string::npos);
  EXPECT_NE(message("-1s").find("negative"), std::string::npos);
  EXPECT_NE(message("s").find("whole number"), std::string::npos);
  EXPECT_NE(message("").find("whole number"), std::string::npos);
  EXPECT_NE(message("1.5s").find("unknown unit '.5s'"), std::string::npos);
  EXPECT_NE(message("99999999999999d").find("too large"), std::string::npos);
  EXPECT_NE(message("10S").find("unknown unit 'S'"), std::string::npos);  // units are lower case
  EXPECT_NE(message(" 10s").find("whole number"), std::string::npos);
  EXPECT_EQ(message("10"), "bad duration '10': missing unit (us, ms, s, m, h or d)");
}

// The largest unit that counts it exactly, and ParseDuration reads it back.
TEST(FormatDuration, InTheLargestExactUnit) {
  const std::pair<Duration, std::string> cases[] = {
      {std::chrono::seconds(10), "10s"},
      {std::chrono::milliseconds(1500), "1500ms"},
      {std::chrono::minutes(1), "1m"},
      {std::chrono::hours(48), "2d"},
      {std::chrono::minutes(90), "90m"},
      {Duration(3'333'334), "3333334us"},
      {Duration(0), "0s"},
  };
  for (const auto& [d, text] : cases) {
    EXPECT_EQ(FormatDuration(d), text);
    EXPECT_EQ(*ParseDuration(text), d) << text;
  }
}

TEST(CeilMillis, RoundsUp) {
  EXPECT_EQ(CeilMillis(Duration(0)), 0);
  EXPECT_EQ(CeilMillis(Duration(1)), 1);
  EXPECT_EQ(CeilMillis(Duration(1000)), 1);
  EXPECT_EQ(CeilMillis(Duration(1001)), 2);
  EXPECT_EQ(CeilMillis(Duration(3'333'334)), 3334);
}

TEST(CeilMillis, NeverNegative) {
  EXPECT_EQ(CeilMillis(Duration(-1)), 0);
  EXPECT_EQ(CeilMillis(Duration(-2000)), 0);
}

}  // namespace
}  // namespace sluice::config
