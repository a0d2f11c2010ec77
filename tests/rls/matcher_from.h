// The matcher of envoyproxy/ratelimit config files given as text (named f0.yaml, f1.yaml, ...),
// for tests: a file that does not parse fails the test.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rls/config.h"
#include "rls/matcher.h"

namespace sluice::rls {

inline Matcher MatcherFrom(std::initializer_list<std::string_view> files) {
  std::vector<DomainConfig> domains;
  int n = 0;
  for (std::string_view yaml : files) {
    auto domain = ParseDomainConfig(yaml, "f" + std::to_string(n++) + ".yaml");
    EXPECT_TRUE(domain.ok()) << domain.status().ToString();
    if (domain.ok()) domains.push_back(std::move(*domain));
  }
  auto config = CombineDomains(std::move(domains));
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto matcher = Matcher::Create(std::move(*config));
  EXPECT_TRUE(matcher.ok()) << matcher.status().ToString();
  return std::move(*matcher);
}

}  // namespace sluice::rls
