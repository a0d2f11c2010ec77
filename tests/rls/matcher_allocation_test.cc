// A warm matcher allocates nothing per lookup: the global operator new is counted around a
// hundred rounds of lookups (exact, wildcard with share_threshold, key-only, no match, override)
// made with one reused MatchKeys. Not built under TSan, whose runtime owns operator new.
#include <gtest/gtest.h>

#include "allocation_counter.h"
#include "rls/matcher.h"

namespace sluice::rls {
namespace {

TEST(RlsMatcher, WarmFindAllocatesNothing) {
  auto domain = ParseDomainConfig(R"(
domain: hot
descriptors:
  - key: tenant
    value: t-*
    share_threshold: true
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 100}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: ip
    value: 10.0.0.1
    rate_limit: {unit: second, requests_per_unit: 0}
)",
                                  "hot.yaml");
  ASSERT_TRUE(domain.ok()) << domain.status().ToString();
  auto config = CombineDomains({*domain});
  ASSERT_TRUE(config.ok());
  auto m = Matcher::Create(std::move(*config));
  ASSERT_TRUE(m.ok());
  const std::vector<std::vector<DescriptorEntry>> requests = {
      {{"tenant", "t-42"}, {"user", "user-with-a-rather-long-identifier-0001"}},
      {{"ip", "192.0.2.77"}},
      {{"ip", "10.0.0.1"}},
      {{"unknown", "x"}},
  };
  MatchKeys keys;
  int limited = 0;
  for (const auto& entries : requests) {  // warm: the buffers grow to size once
    auto match = m->Find("hot", entries, std::nullopt, keys);
    limited += match.ok() && match->kind == MatchKind::kLimited ? 1 : 0;
  }
  EXPECT_EQ(limited, 3);
  const int64_t before = test::AllocationCount();
  for (int round = 0; round < 100; ++round) {
    for (const auto& entries : requests) {
      auto match = m->Find("hot", entries, std::nullopt, keys);
      limited += match.ok() && match->kind == MatchKind::kLimited ? 1 : 0;
    }
    auto overridden = m->Find("hot", requests[1], LimitOverride{5, 1}, keys);
    limited += overridden.ok() ? 1 : 0;
  }
  EXPECT_EQ(test::AllocationCount() - before, 0);
  EXPECT_EQ(limited, 3 + 100 * 4);
}

}  // namespace
}  // namespace sluice::rls
