// The rate limit service in the real `sluice serve` process: gRPC beside HTTP with health, POST
// /json, the rls metrics in /metrics, reloads of the configuration directory on SIGHUP and on a
// file's change (a bad file rejected whole, the old configuration serving on), a reload under
// load answering every call, and a clean stop on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
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
  ASSERT_EQ(ok.load(), kClients * kCallsEach) << service_->process().Log();
  const std::string stats = redis->Cli({"INFO", "commandstats"});
  const std::string field = "cmdstat_evalsha:calls=";
  const size_t at = stats.find(field);
  ASSERT_NE(at, std::string::npos) << stats;
  const int64_t calls = std::stoll(stats.substr(at + field.size()));
  EXPECT_LT(calls * 2, ok.load()) << calls << " script calls for " << ok.load() << " decisions";
  std::printf("%lld script calls for %d decisions\n", static_cast<long long>(calls), ok.load());
}

}  // namespace
}  // namespace sluice::testing
