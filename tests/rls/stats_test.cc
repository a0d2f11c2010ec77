// The rate limit service's counters: what one descriptor's outcome adds (near_limit beyond 80% of
// the limit, as envoyproxy/ratelimit counts it), and the bound on distinct keys.
#include "rls/stats.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::rls {
namespace {

TEST(RlsStats, NearLimitCountsTheHitsBeyondEightyPercent) {
  Stats stats;
  DescriptorCounters& c = stats.For("d.k");
  // Limit 10: the threshold is 8. Hits 1..8 are within and not near; 9 and 10 are near.
  stats.Record(c, {.hits = 7, .requests_per_unit = 10, .remaining = 3});
  EXPECT_EQ(c.near_limit.load(), 0u);
  stats.Record(c, {.hits = 2, .requests_per_unit = 10, .remaining = 1});
  EXPECT_EQ(c.near_limit.load(), 1u);
  stats.Record(c, {.hits = 1, .requests_per_unit = 10, .remaining = 0});
  EXPECT_EQ(c.near_limit.load(), 2u);
  stats.Record(c, {.hits = 3, .over_limit = true, .requests_per_unit = 10, .remaining = 0});
  stats.Record(c, {.hits = 2, .over_limit = true, .shadow_mode = true});
  EXPECT_EQ(c.total_hits.load(), 15u);
  EXPECT_EQ(c.within_limit.load(), 10u);
  EXPECT_EQ(c.over_limit.load(), 5u);
  EXPECT_EQ(c.shadow_mode.load(), 2u);
}

TEST(RlsStats, KeysBeyondTheBoundShareTheOverflowCounters) {
  Stats stats;
  for (size_t i = 0; i < Stats::kMaxKeys; ++i) {
    stats.Record(stats.For("d.k_" + std::to_string(i)), {.hits = 1});
  }
  DescriptorCounters& overflow = stats.For("d.k_new");
  EXPECT_EQ(&overflow, &stats.For(std::string(Stats::kOverflowKey)));
  EXPECT_EQ(&overflow, &stats.For("d.k_other"));
  EXPECT_NE(&overflow, &stats.For("d.k_0"));  // known keys keep their own
  const std::string exposition = stats.Exposition();
  EXPECT_NE(exposition.find("sluice_rls_total_hits{key=\"_overflow\"} 0"), std::string::npos);
  EXPECT_EQ(exposition.find("d.k_new"), std::string::npos);
}

TEST(RlsStats, LabelValuesAreEscaped) {
  Stats stats;
  stats.Record(stats.For("d.k_a\"b\\c\nd"), {.hits = 1});
  EXPECT_NE(stats.Exposition().find("sluice_rls_total_hits{key=\"d.k_a\\\"b\\\\c\\nd\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::rls
