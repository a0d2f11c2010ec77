// The rate limit service's counters: what one descriptor's outcome adds (near_limit beyond 80% of
// the limit, as envoyproxy/ratelimit counts it), and the bounds on distinct keys and on their
// bytes.
#include "rls/stats.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
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

TEST(RlsStats, AKeyTooLongOrNotUtf8IsCountedUnderItsHash) {
  Stats stats;
  const std::string longest = "d.k_" + std::string(Stats::kMaxKeyBytes - 4, 'v');
  EXPECT_EQ(Stats::KeyOf(longest), longest);
  EXPECT_EQ(Stats::KeyOf("d.k_\xc3\xbc\xe2\x82\xac"), "d.k_\xc3\xbc\xe2\x82\xac");  // ü€
  const std::string too_long = longest + "v";
  const std::string hashed = Stats::KeyOf(too_long);
  EXPECT_TRUE(hashed.starts_with("sha256:")) << hashed;
  EXPECT_EQ(hashed.size(), 7u + 64u);
  EXPECT_EQ(Stats::KeyOf(hashed), hashed);  // a key counted under is kept as it is
  for (const std::string not_utf8 : {"d.k_\xff", "d.k_\xc3", "d.k_\xc0\xaf", "d.k_\xed\xa0\x80"}) {
    EXPECT_TRUE(Stats::KeyOf(not_utf8).starts_with("sha256:")) << not_utf8;
  }
  EXPECT_NE(Stats::KeyOf("d.k_\xff"), Stats::KeyOf("d.k_\xfe"));
  stats.Record(stats.For(too_long), {.hits = 1});
  stats.Record(stats.For(too_long), {.hits = 1});
  EXPECT_EQ(&stats.For(too_long), &stats.For(hashed));
  const std::string exposition = stats.Exposition();
  EXPECT_NE(exposition.find("sluice_rls_total_hits{key=\"" + hashed + "\"} 2"), std::string::npos);
  EXPECT_EQ(exposition.find(too_long), std::string::npos);
}

// The worst case: every key at the longest, every byte escaped, every counter at its widest.
TEST(RlsStats, TheExpositionIsBoundedWhateverTheKeys) {
  Stats stats;
  for (size_t i = 0; i <= Stats::kMaxKeys; ++i) {
    std::string key = std::to_string(i);
    key.resize(Stats::kMaxKeyBytes, '"');
    stats.Record(stats.For(key), {.hits = UINT64_MAX, .requests_per_unit = 1});
    stats.For(key).shadow_mode = stats.For(key).near_limit = stats.For(key).over_limit = UINT64_MAX;
  }
  stats.For(std::string(1 << 20, 'v'));  // a 1 MiB key, beyond the bound on keys too
  const size_t size = stats.Exposition().size();
  EXPECT_LE(size, Stats::kMaxExpositionBytes);
  EXPECT_GE(size, Stats::kMaxExpositionBytes * 99 / 100);
  std::printf("the longest exposition: %zu bytes, bound %zu\n", size, Stats::kMaxExpositionBytes);
}

}  // namespace
}  // namespace sluice::rls
