// rls::Service called from many threads at once, without gRPC, over a real redis-server: its
// answers complete on the store's I/O threads, and a request of quotas may be decided twice.
// Labelled redis, which the TSan stage runs (it skips the gRPC tests, label rls).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "matcher_from.h"
#include "rls/service.h"
#include "rls/stats.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"

namespace sluice::rls {
namespace {

using std::chrono::seconds;

// Two quotas and a plain limit that never runs out. Days, so that no window starts mid-test
// (but at midnight UTC).
constexpr std::string_view kQuotas = R"(
domain: quota
descriptors:
  - key: plan
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 30 }
  - key: pool
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 20 }
  - key: ip
    rate_limit: { unit: day, requests_per_unit: 1000 }
)";

pb::RateLimitRequest Request() {
  pb::RateLimitRequest request;
  request.set_domain("quota");
  for (const char* key : {"plan", "pool", "ip"}) {
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key(key);
    entry->set_value("shared");
  }
  return request;
}

// Decides `request` and waits for the answer.
pb::RateLimitResponse Decide(Service& service, const pb::RateLimitRequest& request) {
  pb::RateLimitResponse response;
  std::promise<Status> done;
  service.ShouldRateLimit(request, response, [&](Status s) { done.set_value(std::move(s)); });
  const Status status = done.get_future().get();
  EXPECT_TRUE(status.ok()) << status.ToString();
  return response;
}

// Every admitted request consumed each quota that was within when the store decided it, so the
// plan's 30 admit 30 requests: 20 on both quotas, then 10 on the plan alone once the pool is
// over (decided once more without it). Whatever the interleaving of 4 threads, exactly 30 of
// 100 are admitted, and no other counter moves for the denied ones.
TEST(RlsServiceConcurrency, QuotasAdmitExactlyTheirLimitsTogether) {
  auto redis = testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  auto store = OpenStore(redis->url(), OpenStoreOptions{.timeout = seconds(2)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Stats stats;
  Service service(**store, stats,
                  std::make_shared<const ServiceConfig>(
                      ServiceConfig{.matcher = MatcherFrom({kQuotas}), .options = {}}));

  const pb::RateLimitRequest request = Request();
  std::atomic<int> admitted{0}, denied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        const auto response = Decide(service, request);
        if (response.overall_code() == pb::RateLimitResponse::OK) {
          ++admitted;
        } else if (response.overall_code() == pb::RateLimitResponse::OVER_LIMIT) {
          ++denied;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 30);
  EXPECT_EQ(denied.load(), 70);

  // One more, denied: the ip's limit, held back, shows what the admitted ones consumed.
  const auto last = Decide(service, request);
  ASSERT_EQ(last.statuses_size(), 3);
  EXPECT_EQ(last.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(last.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(last.statuses(1).limit_remaining(), 0u);
  EXPECT_EQ(last.statuses(2).limit_remaining(), 1000u - 30u);
}

}  // namespace
}  // namespace sluice::rls
