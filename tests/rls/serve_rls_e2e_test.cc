// The rate limit service in the real `sluice serve` process: gRPC beside HTTP with health, POST
// /json, the rls metrics in /metrics, reloads of the configuration directory on SIGHUP and on a
// file's change (a bad file rejected whole, the old configuration serving on; a file written in
// place applied only once whole), a reload under load answering every call, and a clean stop on
// SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "support/delay_proxy.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace sluice::testing {
namespace {

namespace pb = envoy::service::ratelimit::v3;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Domain(int requests_per_day) {
  return "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, "
         "requests_per_unit: " +
         std::to_string(requests_per_day) + " }\n";
}

class ServeRls : public ::testing::Test {
 protected:
  // `sluice serve` with the rate limit service on a free gRPC port, its directory holding
  // api.yaml with `requests_per_day` (days: on the real clock, no window starts mid-test, but at
  // midnight UTC).
  void Start(int requests_per_day, const std::string& extra_rls_fields = "watch: false",
             const std::string& store_url = "memory://") {
    ASSERT_TRUE(dir_.ok());
    std::filesystem::create_directory(dir_.File("rls"));
    WriteFile(dir_.File("rls/api.yaml"), Domain(requests_per_day));
    grpc_port_ = FreeLoopbackPort();
    service_ = std::make_unique<Service>(
        "rls: { config_dir: \"" + dir_.File("rls") + "\", grpc_listen: \"127.0.0.1:" +
            std::to_string(grpc_port_) + "\", " + extra_rls_fields +
            " }\nrules:\n  - { name: api, algorithm: gcra, limit: 10, period: 1s }\n",
        store_url);
    ASSERT_TRUE(service_->up()) << service_->process().Log();
    stub_ = pb::RateLimitService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Call(const std::string& user, pb::RateLimitResponse& response) {
    pb::RateLimitRequest request;
    request.set_domain("api");
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value(user);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(5));
    return stub_->ShouldRateLimit(&context, request, &response);
  }

  // The limit applied to `user` (a fresh one each time, so nothing runs out).
  uint32_t LimitOf(const std::string& user) {
    pb::RateLimitResponse response;
    const grpc::Status status = Call(user, response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.statuses_size() == 1 ? response.statuses(0).current_limit().requests_per_unit()
                                         : 0;
  }

  // Polls until `user`'s limit is `expected` (true) or 10 s pass.
  bool WaitForLimit(uint32_t expected) {
    const auto until = std::chrono::steady_clock::now() + seconds(10);
    for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
      if (LimitOf("poll" + std::to_string(i)) == expected) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  TempDir dir_;
  int grpc_port_ = 0;
  std::unique_ptr<Service> service_;
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
};

TEST_F(ServeRls, AnswersGrpcJsonHealthAndMetricsAndStopsCleanly) {
  Start(2);
  pb::RateLimitResponse response;
  ASSERT_TRUE(Call("a", response).ok());
  EXPECT_EQ(response.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 1u);

  auto client = service_->Client();
  const std::string body =
      R"({"domain":"api","descriptors":[{"entries":[{"key":"user","value":"a"}]}]})";
  auto json = client.Post("/json", body, "application/json");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->status, 200);
  EXPECT_EQ(nlohmann::json::parse(json->body)["overallCode"], "OK");
  json = client.Post("/json", body, "application/json");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->status, 429);
  EXPECT_EQ(nlohmann::json::parse(json->body)["statuses"][0]["code"], "OVER_LIMIT");
  json = client.Post("/json", R"({"domain":"api","descriptors":[{"nope":1}]})", "application/json");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->status, 400);
  // Bytes that are not UTF-8, which the parser's error quotes: a 400, and the service goes on.
  const std::string not_utf8 = "\xff";
  for (const std::string& bad : {not_utf8, R"({"domain":"ap)" + not_utf8 + R"(i"})",
                                 R"({"hits_addend":")" + not_utf8 + R"("})"}) {
    json = client.Post("/json", bad, "application/json");
    ASSERT_TRUE(json) << "the service answers";
    EXPECT_EQ(json->status, 400);
    EXPECT_TRUE(nlohmann::json::parse(json->body).contains("error")) << json->body;
  }

  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(5));
  grpc::health::v1::HealthCheckResponse serving;
  ASSERT_TRUE(health->Check(&context, {}, &serving).ok());
  EXPECT_EQ(serving.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_rls_total_hits{key=\"api.user\"}"), 3);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_rls_over_limit{key=\"api.user\"}"), 1);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_rls_within_limit{key=\"api.user\"}"), 2);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_rls_near_limit{key=\"api.user\"}"), 1);

  EXPECT_EQ(service_->process().Stop(seconds(10)), 0) << service_->process().Log();
}

TEST_F(ServeRls, AJsonBodyWithAKeyTwiceIs400NamingItAndCountsNothing) {
  Start(2);
  auto client = service_->Client();
  for (
      const auto& [body, key] : std::vector<std::pair<std::string, std::string>>{
          {R"({"domain":"other","domain":"api","descriptors":[{"entries":[{"key":"user","value":"a"}]}]})",
           "domain"},
          {R"({"domain":"api","descriptors":[{"entries":[{"key":"user","value":"a","value":"b"}]}]})",
           "value"},
          {R"({"domain":"api","hitsAddend":2,"descriptors":[{"entries":[{"key":"user","value":"a"}]}],"hitsAddend":0})",
           "hitsAddend"},
      }) {
    auto json = client.Post("/json", body, "application/json");
    ASSERT_TRUE(json);
    EXPECT_EQ(json->status, 400) << body;
    EXPECT_EQ(nlohmann::json::parse(json->body)["error"],
              "duplicate key '" + key + "': each key may appear once in an object")
        << json->body;
  }
  // One field under both of its names, which protobuf's JSON reads as one key, keeping the last.
  for (
      const std::string body : {
          R"({"domain":"api","hitsAddend":3,"hits_addend":0,"descriptors":[{"entries":[{"key":"user","value":"a"}]}]})",
          R"({"domain":"api","descriptors":[{"entries":[{"key":"user","value":"a"}],"limit":{"requests_per_unit":9,"requestsPerUnit":1,"unit":"DAY"}}]})",
      }) {
    auto json = client.Post("/json", body, "application/json");
    ASSERT_TRUE(json);
    EXPECT_EQ(json->status, 400) << body;
    const std::string error = nlohmann::json::parse(json->body)["error"];
    EXPECT_TRUE(error.ends_with("' is given twice, under both of its names")) << error;
  }
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_rls_total_hits{key=\"api.user\"}"), -1)
      << "nothing was counted";
}

TEST_F(ServeRls, SighupReloadsTheDirectoryAndABadFileKeepsTheOldConfiguration) {
  Start(5);
  EXPECT_EQ(LimitOf("x"), 5u);
  WriteFile(dir_.File("rls/api.yaml"), Domain(7));
  service_->process().Signal(SIGHUP);
  ASSERT_TRUE(WaitForLimit(7)) << service_->process().Log();

  // A second file, good, beside a bad one: rejected whole.
  WriteFile(dir_.File("rls/other.yaml"), "domain: other\ndescriptors: []\n");
  WriteFile(dir_.File("rls/api.yaml"), Domain(9) + "    fortnight: true\n");
  service_->process().Signal(SIGHUP);
  ASSERT_TRUE(service_->process().WaitForLog("rls: reload rejected")) << service_->process().Log();
  EXPECT_EQ(LimitOf("y"), 7u);
}

TEST_F(ServeRls, AChangedFileIsReloadedWithoutASignal) {
  Start(5, "watch: true");
  EXPECT_EQ(LimitOf("x"), 5u);
  WriteFile(dir_.File("rls/api.yaml"), Domain(11));
  EXPECT_TRUE(WaitForLimit(11)) << service_->process().Log();
}

// Calls on fresh users, from a thread of its own, until stopped: the limits they were answered
// under (0 for an answer without a current limit: OK and uncounted).
class LimitsSeen {
 public:
  explicit LimitsSeen(std::function<uint32_t(const std::string&)> limit_of)
      : thread_([this, limit_of = std::move(limit_of)] {
          for (int i = 0; !stop_.load() && i < 1'000'000; ++i) {
            const uint32_t limit = limit_of("seen" + std::to_string(i));
            std::lock_guard lock(mu_);
            seen_.insert(limit);
          }
        }) {}
  ~LimitsSeen() { Stop(); }

  std::set<uint32_t> Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<uint32_t> seen_;
  std::thread thread_;
};

// api.yaml in block style, cut where an editor's or a tool's write in place may pause: after the
// descriptor (no rate_limit: every call OK, uncounted), then after the first digit of the limit
// (a limit of `first_digit`), then whole.
std::vector<std::string> StepsOf(int first_digit) {
  return {
      "domain: api\ndescriptors:\n  - key: user\n",
      "    rate_limit:\n      unit: day\n      requests_per_unit: " + std::to_string(first_digit),
      "000000\n"};
}

TEST_F(ServeRls, AFileHeldOpenBetweenWritesIsAppliedOnlyOnceClosed) {
  Start(1'000'000, "watch: true");
  ASSERT_EQ(LimitOf("x"), 1'000'000u);
  LimitsSeen seen([this](const std::string& user) { return LimitOf(user); });
  {
    // One open file, written in steps with pauses longer than the watcher's poll.
    std::ofstream out(dir_.File("rls/api.yaml"), std::ios::trunc);
    for (const std::string& step : StepsOf(2)) {
      out << step << std::flush;
      std::this_thread::sleep_for(milliseconds(1500));
    }
  }
  EXPECT_TRUE(WaitForLimit(2'000'000)) << service_->process().Log();
  EXPECT_EQ(seen.Stop(), (std::set<uint32_t>{1'000'000, 2'000'000}))
      << "a half-written file was applied";
}

TEST_F(ServeRls, AFileRewrittenInStepsIsAppliedOnlyWhole) {
  Start(1'000'000, "watch: true");
  ASSERT_EQ(LimitOf("x"), 1'000'000u);
  LimitsSeen seen([this](const std::string& user) { return LimitOf(user); });
  // Each step opens the file, writes and closes it (`>` then `>>` in a shell), 300 ms apart:
  // twice, so that the half-written states last longer than a poll in all.
  for (int first_digit : {2, 3}) {
    bool first = true;
    for (const std::string& step : StepsOf(first_digit)) {
      std::ofstream(dir_.File("rls/api.yaml"), first ? std::ios::trunc : std::ios::app) << step;
      first = false;
      std::this_thread::sleep_for(milliseconds(300));
    }
  }
  EXPECT_TRUE(WaitForLimit(3'000'000)) << service_->process().Log();
  const std::set<uint32_t> limits = seen.Stop();
  for (uint32_t limit : limits) {
    EXPECT_TRUE(limit == 1'000'000 || limit == 2'000'000 || limit == 3'000'000)
        << "a half-written file was applied: a limit of " << limit;
  }
}

TEST_F(ServeRls, ReloadsUnderLoadAnswerEveryCall) {
  Start(1'000'000);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, failed{0};
  std::thread load([&] {
    for (int i = 0; !stop.load() && i < 100'000; ++i) {
      pb::RateLimitResponse response;
      (Call("load" + std::to_string(i % 50), response).ok() ? answered : failed)++;
    }
  });
  for (int i = 0; i < 10; ++i) {
    WriteFile(dir_.File("rls/api.yaml"), Domain(1'000'000 + i));
    service_->process().Signal(SIGHUP);
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(WaitForLimit(1'000'009));
  stop = true;
  load.join();
  EXPECT_GT(answered.load(), 0);
  EXPECT_EQ(failed.load(), 0);
}

// On a real Redis, with `sluice serve` as shipped: calls from many clients at once share script
// calls (fewer than half as many calls as decisions, counted by Redis).
TEST_F(ServeRls, OnRedisConcurrentCallsShareScriptCalls) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Start(1'000'000, "watch: false", redis->url());
  redis->Cli({"CONFIG", "RESETSTAT"});
  constexpr int kClients = 32, kCallsEach = 150;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kCallsEach; ++i) {
        pb::RateLimitResponse response;
        const std::string user = std::to_string(c) + "-" + std::to_string(i);
        if (Call(user, response).ok() && response.overall_code() == pb::RateLimitResponse::OK) {
          ++ok;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  // Nearly all are decided OK; on a slow (sanitizer) build a few may wait in the instance's own
  // queue past half their deadline and be answered OVER_LIMIT as busy, which decides nothing.
  ASSERT_GE(ok.load() * 100, kClients * kCallsEach * 95) << service_->process().Log();
  const std::string stats = redis->Cli({"INFO", "commandstats"});
  const std::string field = "cmdstat_evalsha:calls=";
  const size_t at = stats.find(field);
  ASSERT_NE(at, std::string::npos) << stats;
  const int64_t calls = std::stoll(stats.substr(at + field.size()));
  EXPECT_LT(calls * 2, ok.load()) << calls << " script calls for " << ok.load() << " decisions";
  std::printf("%lld script calls for %d decisions\n", static_cast<long long>(calls), ok.load());
}

// One Envoy connection (one gRPC peer, so one caller of the admission) carrying many calls at
// once: alone, it may hold the instance's whole budget of checks in flight, so a healthy store
// refuses it nothing; once the store answers later than half its deadline, the budget shrinks to
// its floor and the calls beyond it are answered OVER_LIMIT with Retry-After at once (never an
// error, which Envoy's default failure_mode_deny: false would let through), while the others are
// still decided.
TEST_F(ServeRls, ALonePeerHoldsTheWholeBudgetAndIsAnsweredBusyBeyondIt) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  DelayProxy proxy(redis->port());
  ASSERT_TRUE(dir_.ok());
  std::filesystem::create_directory(dir_.File("rls"));
  WriteFile(dir_.File("rls/api.yaml"), Domain(1'000'000'000));
  grpc_port_ = FreeLoopbackPort();
  service_ = std::make_unique<Service>(
      "rls: { config_dir: \"" + dir_.File("rls") +
          "\", grpc_listen: \"127.0.0.1:" + std::to_string(grpc_port_) + "\", watch: false }\n",
      "redis://127.0.0.1:" + std::to_string(proxy.port()), "timeout_ms: 400");
  ASSERT_TRUE(service_->up()) << service_->process().Log();
  stub_ = pb::RateLimitService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));

  // Calls from kClients threads on the one channel for `how_long`: decided OK, answered busy
  // (OVER_LIMIT: no user comes near the limit), or failed.
  constexpr int kClients = 48;
  struct Counts {
    std::atomic<int64_t> ok{0}, busy{0}, busy_without_retry_after{0}, failed{0};
  };
  const auto load = [&](std::chrono::milliseconds how_long, Counts& counts) {
    std::vector<std::thread> clients;
    const auto until = std::chrono::steady_clock::now() + how_long;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        for (int i = 0; std::chrono::steady_clock::now() < until && i < 100'000; ++i) {
          pb::RateLimitResponse response;
          const grpc::Status status = Call(
              std::to_string(c) + "-" + std::to_string(i) + "-" + std::to_string(how_long.count()),
              response);
          if (!status.ok()) {
            ++counts.failed;
          } else if (response.overall_code() == pb::RateLimitResponse::OK) {
            ++counts.ok;
          } else {
            ++counts.busy;
            bool retry_after = false;
            for (const auto& header : response.response_headers_to_add()) {
              retry_after = retry_after || header.key() == "Retry-After";
            }
            if (!retry_after) ++counts.busy_without_retry_after;
            std::this_thread::sleep_for(milliseconds(10));
          }
        }
      });
    }
    for (auto& t : clients) t.join();
  };

  Counts healthy;
  load(milliseconds(1500), healthy);
  // 250 ms a round trip: later than half the 400 ms deadline, so the budget falls to its floor,
  // and within it, so Redis still decides what is sent.
  proxy.set_delay(milliseconds(125));
  Counts slowed;
  load(milliseconds(3000), slowed);
  proxy.set_delay(milliseconds(0));
  std::printf(
      "one peer, %d calls at once: healthy %lld decided, %lld busy; store answering in 250 ms: "
      "%lld decided, %lld busy\n",
      kClients, static_cast<long long>(healthy.ok.load()),
      static_cast<long long>(healthy.busy.load()), static_cast<long long>(slowed.ok.load()),
      static_cast<long long>(slowed.busy.load()));
  EXPECT_GT(healthy.ok.load(), 0);
  EXPECT_EQ(healthy.busy.load(), 0) << "a lone peer holds the whole budget";
  EXPECT_EQ(healthy.failed.load(), 0);
  EXPECT_GT(slowed.ok.load(), 0) << "the calls within the budget are still decided";
  EXPECT_GT(slowed.busy.load(), 0) << "the calls beyond its floor are answered busy";
  EXPECT_EQ(slowed.busy_without_retry_after.load(), 0);
  EXPECT_EQ(slowed.failed.load(), 0) << "never an error, which Envoy would let through";
}

// Someone replacing envoyproxy/ratelimit writes its configuration and no sluice rules: serve
// starts with an rls section alone and answers on gRPC.
TEST_F(ServeRls, StartsWithAnRlsSectionAndNoRules) {
  ASSERT_TRUE(dir_.ok());
  std::filesystem::create_directory(dir_.File("rls"));
  WriteFile(dir_.File("rls/api.yaml"), Domain(2));
  grpc_port_ = FreeLoopbackPort();
  service_ = std::make_unique<Service>(
      "rls: { config_dir: \"" + dir_.File("rls") +
      "\", grpc_listen: \"127.0.0.1:" + std::to_string(grpc_port_) + "\", watch: false }\n");
  ASSERT_TRUE(service_->up()) << service_->process().Log();
  stub_ = pb::RateLimitService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(LimitOf("a"), 2u);
  EXPECT_EQ(service_->process().Stop(seconds(10)), 0) << service_->process().Log();
}

}  // namespace
}  // namespace sluice::testing
