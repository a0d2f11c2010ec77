// `sluice serve` (the real binary, its path the first argument of this program) on a real
// redis-server whose errors are not outages, with rules that fail open: a Redis filled by a
// client's flood of distinct keys (maxmemory, noeviction) answers every check 503 with
// Retry-After, never allowed:true; a key holding another type than its script keeps there is
// answered 500, that key alone, while another rule of the instance goes on being decided by
// Redis, exactly, its breaker closed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::RedisServer;
using sluice::testing::Service;
using Steady = std::chrono::steady_clock;

std::string CheckBody(const std::string& rule, const std::string& key) {
  return R"({"rule":")" + rule + R"(","key":")" + key + R"("})";
}

// Whether /readyz answers 200 within 5 s.
bool Ready(const Service& service) {
  httplib::Client client = service.Client();
  const auto until = Steady::now() + 5s;
  for (int i = 0; i < 500 && Steady::now() < until; ++i) {
    if (auto r = client.Get("/readyz"); r && r->status == 200) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Batches of 1000 distinct keys of `rule` until an item is not decided by Redis (the store is
// full: true), or 400 batches or 60 s have passed (false).
bool FloodUntilRefused(const Service& service, const std::string& rule) {
  httplib::Client client = service.Client();
  const auto until = Steady::now() + 60s;
  for (int b = 0; b < 400 && Steady::now() < until; ++b) {
    std::string body = R"({"checks":[)";
    for (int i = 0; i < 1000; ++i) {
      if (i > 0) body += ',';
      body += CheckBody(rule, "flood:" + std::to_string(b) + ":" + std::to_string(i));
    }
    body += "]}";
    auto r = client.Post("/v1/check", body, "application/json");
    if (!r) continue;
    // Refused, or (were a full store taken for an outage) admitted by the failure policy.
    if (r->body.find(R"("error")") != std::string::npos ||
        r->body.find(R"("source":"fail_open")") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Lowers maxmemory below the memory Redis uses now (9/10 of it): a flood's batch is refused once
// its buffers take Redis past maxmemory, and a small write would fit again between two batches.
// This holds the store full, as a flood that goes on does.
void HoldFull(const RedisServer& server) {
  const std::string memory = server.Cli({"INFO", "memory"});
  const std::string field = "used_memory:";
  const size_t at = memory.find(field);
  ASSERT_NE(at, std::string::npos) << memory;
  const int64_t used = std::stoll(memory.substr(at + field.size()));
  server.Cli({"CONFIG", "SET", "maxmemory", std::to_string(used / 10 * 9)});
}

int Occurrences(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

int64_t BreakerOpens(const Service& service) {
  auto r = service.Client().Get("/metrics");
  return r ? sluice::testing::MetricValue(r->body, "sluice_breaker_opens_total") : -1;
}

TEST(ServeRedisErrors, AFullRedisAnswers503WithRetryAfterNeverAFailOpenAdmission) {
  auto redis = RedisServer::Start({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
  ASSERT_NE(redis, nullptr);
  // The rate limit service too (/json only), with a domain of one descriptor.
  sluice::testing::TempDir rls;
  ASSERT_TRUE(rls.ok());
  sluice::testing::WriteFile(rls.File("api.yaml"),
                             "domain: api\ndescriptors:\n  - key: user\n    rate_limit: "
                             "{ unit: second, requests_per_unit: 5 }\n");
  // Deadlines no loaded machine misses (here and below): an outage would be the failure
  // policy's to decide.
  Service service("rls: { config_dir: \"" + rls.path() + "\" }\n" + R"(rules:
  - {name: flood, algorithm: sliding_window, limit: 100, period: 1h, on_error: fail_open}
  - {name: victim, algorithm: gcra, limit: 5, period: 1s, on_error: fail_open}
)",
                  redis->url(), "timeout_ms: 2000");
  ASSERT_TRUE(service.up()) << service.process().Log();
  ASSERT_TRUE(Ready(service)) << service.process().Log();
  ASSERT_TRUE(FloodUntilRefused(service, "flood")) << redis->Cli({"INFO", "memory"});
  HoldFull(*redis);

  httplib::Client client = service.Client();
  int refused = 0, admitted = 0, other = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = client.Post("/v1/check", CheckBody("victim", "user:" + std::to_string(i % 4)),
                         "application/json");
    ASSERT_TRUE(r);
    if (r->status == 503 && r->has_header("Retry-After") &&
        r->body.find("full") != std::string::npos) {
      ++refused;
    } else if (r->body.find(R"("allowed":true)") != std::string::npos) {
      ++admitted;
    } else {
      ++other;
      ADD_FAILURE() << r->status << " " << r->body;
    }
  }
  EXPECT_EQ(refused, 40);
  EXPECT_EQ(admitted, 0);
  EXPECT_EQ(other, 0);
  // The rate limit service refuses, never OK nor an error that Envoy's default
  // failure_mode_deny: false would let through.
  for (int i = 0; i < 5; ++i) {
    auto r = client.Post("/json",
                         R"({"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u)" +
                             std::to_string(i) + R"("}]}]})",
                         "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body;
    EXPECT_NE(r->body.find(R"("overallCode":"OVER_LIMIT")"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("Retry-After"), std::string::npos) << r->body;
  }
  EXPECT_EQ(BreakerOpens(service), 0);
  // The store answers, refusing: warned of now and then, with how often, not once per refusal.
  const std::string log = service.process().Log();
  EXPECT_LE(Occurrences(log, "store refused"), 2) << log;
  EXPECT_EQ(Occurrences(log, "store failed"), 0) << log;
  // /readyz peeks, which writes nothing: Redis answers it, full or not.
  EXPECT_TRUE(Ready(service));
  EXPECT_EQ(service.process().Stop(5s), 0);
}

TEST(ServeRedisErrors, AKeyOfTheWrongTypeIs500AloneAndTheOtherRulesStayExact) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(R"(rules:
  - {name: log, algorithm: sliding_log, limit: 5, period: 1h, on_error: fail_open}
  - {name: other, algorithm: fixed_window, limit: 5, period: 1h, on_error: fail_open}
)",
                  redis->url(), "timeout_ms: 2000");
  ASSERT_TRUE(service.up()) << service.process().Log();
  ASSERT_TRUE(Ready(service)) << service.process().Log();
  httplib::Client client = service.Client();
  auto first = client.Post("/v1/check", CheckBody("log", "corrupt"), "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  // A list where sliding_log keeps the count of the units that left its log, which every later
  // check of the key reads.
  const std::string count_key = "sluice:log:{corrupt}:n";
  ASSERT_EQ(redis->Cli({"TYPE", count_key}), "string");
  redis->Cli({"DEL", count_key});
  redis->Cli({"RPUSH", count_key, "not a count"});
  redis->Cli({"PEXPIRE", count_key, "3600000"});

  // Runs of checks of the corrupted key longer than the failures that open a breaker (5).
  int corrupt_500 = 0, allowed = 0, denied = 0;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 6; ++i) {
      auto bad = client.Post("/v1/check", CheckBody("log", "corrupt"), "application/json");
      ASSERT_TRUE(bad);
      if (bad->status == 500 && !bad->has_header("Retry-After")) {
        ++corrupt_500;
      } else {
        ADD_FAILURE() << bad->status << " " << bad->body;
      }
    }
    for (int i = 0; i < 4; ++i) {
      auto good = client.Post("/v1/check", CheckBody("other", "k"), "application/json");
      ASSERT_TRUE(good);
      const json d = json::parse(good->body, nullptr, false);
      ASSERT_TRUE(d.is_object() && d.contains("allowed") && d.contains("source")) << good->body;
      // Decided from Redis's answers (a denial may come from the hot-key cache), never by policy.
      EXPECT_TRUE(d["source"] == "store" || d["source"] == "hot_key_cache") << good->body;
      ++(d["allowed"] == true ? allowed : denied);
    }
  }
  EXPECT_EQ(corrupt_500, 60);
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(denied, 35);
  EXPECT_EQ(BreakerOpens(service), 0);
  const std::string log = service.process().Log();
  EXPECT_LE(Occurrences(log, "store refused"), 2) << log;
  EXPECT_EQ(Occurrences(log, "store failed"), 0) << log;
  EXPECT_EQ(service.process().Stop(5s), 0);
}

}  // namespace
