// The bound on connections derived from the file-descriptor limit: the default within the soft
// limit less a reserve, the soft limit raised towards the hard one as far as the bound needs, and
// a warning when the limit is low or cannot hold a configured bound.
#include "http/connection_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace sluice::http {
namespace {

TEST(ConnectionLimitTest, TheDefaultFitsAnAmpleLimitUnchanged) {
  const ConnectionPlan plan = PlanConnections(std::nullopt, {.soft = 20'000, .hard = 20'000});
  EXPECT_EQ(plan.max_connections, kDefaultMaxConnections);
  EXPECT_EQ(plan.soft_limit, 20'000u);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(ConnectionLimitTest, TheSoftLimitIsRaisedAsFarAsTheBoundNeeds) {
  // systemd's default: soft 1024, hard 524288.
  ConnectionPlan plan = PlanConnections(std::nullopt, {.soft = 1024, .hard = 524'288});
  EXPECT_EQ(plan.max_connections, 10'000u);
  EXPECT_EQ(plan.soft_limit, 10'128u);  // the bound and the reserve, no more
  EXPECT_TRUE(plan.warnings.empty());

  plan = PlanConnections(200'000, {.soft = 1024, .hard = RLIM_INFINITY});
  EXPECT_EQ(plan.max_connections, 200'000u);
  EXPECT_EQ(plan.soft_limit, 200'128u);
  EXPECT_TRUE(plan.warnings.empty());

  plan = PlanConnections(500, {.soft = 1024, .hard = 4096});  // fits: nothing to raise
  EXPECT_EQ(plan.max_connections, 500u);
  EXPECT_EQ(plan.soft_limit, 1024u);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(ConnectionLimitTest, ALowLimitLowersTheDefaultWithAWarning) {
  ConnectionPlan plan = PlanConnections(std::nullopt, {.soft = 1024, .hard = 1024});
  EXPECT_EQ(plan.max_connections, 896u);
  EXPECT_EQ(plan.soft_limit, 1024u);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(plan.warnings[0],
            "the file-descriptor limit is low (soft 1024, hard 1024): at most 896 connections "
            "instead of 10000; raise it (ulimit -n, systemd LimitNOFILE=) or set "
            "server.max_connections");

  plan = PlanConnections(std::nullopt, {.soft = 64, .hard = 64});
  EXPECT_EQ(plan.max_connections, 48u);  // a quarter kept back
  EXPECT_EQ(plan.warnings.size(), 1u);

  // Not low: lowered to what fits, no warning.
  plan = PlanConnections(std::nullopt, {.soft = 8192, .hard = 8192});
  EXPECT_EQ(plan.max_connections, 8064u);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(ConnectionLimitTest, AConfiguredBoundTheLimitCannotHoldIsKeptWithAWarning) {
  const ConnectionPlan plan = PlanConnections(5000, {.soft = 1024, .hard = 4096});
  EXPECT_EQ(plan.max_connections, 5000u);
  EXPECT_EQ(plan.soft_limit, 4096u);  // raised as far as allowed
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(plan.warnings[0],
            "server.max_connections 5000 is above what the file-descriptor limit (soft 4096, "
            "hard 4096) allows, about 3968 connections: beyond them accepting fails (EMFILE) "
            "and new clients wait in the listen queue; raise the limit (ulimit -n, systemd "
            "LimitNOFILE=) or lower server.max_connections");
}

}  // namespace
}  // namespace sluice::http
