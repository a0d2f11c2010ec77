// A rule's `lease` in `sluice serve` as a user runs it: the real binary (its path is
// the first argument of this test program) on a real redis-server, spoken to over HTTP. Leases
// of 10 decide a hot key's checks with a tenth of the Redis calls and never admit more than the
// limit; memory:// accepts the lease and decides as it always does; --check-config refuses bad
// terms.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::MetricValue;
using sluice::testing::Process;
using sluice::testing::RedisServer;
using sluice::testing::Service;
using sluice::testing::TempDir;
using sluice::testing::WriteFile;

// 100 a minute with room for all 100 at once: a lease of 10 is whole ten times, and the next
// whole one 6 s later.
constexpr const char* kRules = R"(rules:
  - { name: hot, algorithm: gcra, limit: 100, period: 1m, burst: 100,
      lease: { units: 10, lifetime: 1s } }
  - { name: plain, algorithm: gcra, limit: 100, period: 1m, burst: 100 }
)";

// The scripts Redis ran (EVALSHA, and EVAL should a script have been flushed) since the last
// CONFIG RESETSTAT.
int64_t ScriptCalls(const RedisServer& redis) {
  const std::string info = redis.Cli({"INFO", "commandstats"});
  int64_t calls = 0;
  for (std::string_view command : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const size_t at = info.find(command);
    if (at != std::string::npos) calls += std::stoll(info.substr(at + command.size()));
  }
  return calls;
}

// `n` checks of `rule` on `key`, one after the other: how many were allowed (-1 on an error).
int Admitted(httplib::Client& client, std::string_view rule, std::string_view key, int n) {
  const std::string body = json{{"rule", rule}, {"key", key}}.dump();
  int allowed = 0;
  for (int i = 0; i < n; ++i) {
    auto r = client.Post("/v1/check", body, "application/json");
    if (!r || r->status != 200) return -1;
    if (json::parse(r->body, nullptr, false)["allowed"] == true) ++allowed;
  }
  return allowed;
}

TEST(ServeLeaseE2ETest, OnRedisAHotKeyIsDecidedFromLeasesWithATenthOfTheCalls) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(kRules, redis->url());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();

  // Without a lease, a check is a script call (once the script is loaded, by a first one).
  EXPECT_EQ(Admitted(client, "plain", "warm-up", 1), 1);
  ASSERT_EQ(redis->Cli({"CONFIG", "RESETSTAT"}), "OK");
  EXPECT_EQ(Admitted(client, "plain", "k", 20), 20);
  EXPECT_EQ(ScriptCalls(*redis), 20);

  // With leases of 10: the 100 the limit holds are admitted, the 101st is not (the next whole
  // lease is 6 s away, and 100 checks take far less than a lease's second per 10).
  ASSERT_EQ(redis->Cli({"CONFIG", "RESETSTAT"}), "OK");
  EXPECT_EQ(Admitted(client, "hot", "k", 100), 100);
  EXPECT_EQ(Admitted(client, "hot", "k", 1), 0);
  const int64_t calls = ScriptCalls(*redis);
  std::printf("Redis ran %lld script call(s) for 101 checks of a key leased 10 at a time\n",
              static_cast<long long>(calls));
  EXPECT_GE(calls, 10);  // a lease is one call; each of the ten was counted in Redis
  EXPECT_LE(calls, 15);

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_GE(MetricValue(metrics->body, "sluice_lease_taken_total"), 10) << metrics->body;
  EXPECT_EQ(MetricValue(metrics->body, "sluice_lease_units_used_total"), 100) << metrics->body;
  EXPECT_EQ(MetricValue(metrics->body, "sluice_checks_total{rule=\"hot\",result=\"allowed\"}"),
            100);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_checks_total{rule=\"hot\",result=\"denied\"}"), 1);
  EXPECT_GE(MetricValue(metrics->body, "sluice_lease_held_keys"), 0);  // exposed
}

// memory:// decides every check in the process already: the lease is accepted and changes
// nothing, and there are no leases to report.
TEST(ServeLeaseE2ETest, OnMemoryTheLeaseIsAcceptedAndTheLimitHoldsAsEver) {
  // 100 an hour: not one more unit comes back while the test runs, however slowly.
  Service service(R"(rules:
  - { name: hot, algorithm: gcra, limit: 100, period: 1h, burst: 100, lease: { units: 10 } }
)");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  EXPECT_EQ(Admitted(client, "hot", "k", 101), 100);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->body.find("sluice_lease"), std::string::npos);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_checks_total{rule=\"hot\",result=\"denied\"}"), 1);
}

TEST(ServeLeaseE2ETest, CheckConfigRefusesALeaseTheLimitCannotGive) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string config = dir.File("bad.yaml");
  WriteFile(config,
            "rules:\n  - { name: hot, algorithm: gcra, limit: 100, period: 1m,\n"
            "      lease: { units: 101 } }\n");
  Process process({"serve", "--check-config", config}, dir.File("log"));
  ASSERT_TRUE(process.started());
  EXPECT_EQ(process.WaitExit(5s), 2);
  EXPECT_NE(
      process.Log().find(config + ":3: rules[0].lease.units: lease units must be between 1 and the "
                                  "capacity 100, got 101"),
      std::string::npos)
      << process.Log();
}

}  // namespace
