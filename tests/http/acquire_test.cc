// POST /v1/acquire on the Api, with a MemoryStore and ManualTimers on one ManualClock: answers
// come when the slot comes (booked on the meters, retried on the windows), or with the denial,
// and carry Server-Timing; bad input is refused; CancelWaits answers every waiter at once.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "config/config.h"
#include "http/api.h"
#include "sluice/acquirer.h"
#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kRules = R"(
rules:
  - { name: shaped, algorithm: gcra, limit: 10, period: 1s, burst: 1 }
  - { name: window, algorithm: fixed_window, limit: 1, period: 1s }
)";

std::vector<config::Rule> ParseRules(std::string_view yaml) {
  auto config = config::ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->rules;
}

// One request in flight: the Exchange lives as long as the answer may come.
struct Pending {
  bool done = false;
  Exchange exchange{[this] { done = true; }};

  const std::string& header(std::string_view name) const {
    static const std::string kAbsent = "<absent>";
    const std::string* value = exchange.response.FindHeader(name);
    return value ? *value : kAbsent;
  }
  const std::string& body() const { return exchange.response.body; }
};

class AcquireTest : public ::testing::Test {
 protected:
  AcquireTest() {
    // Start on a second boundary, so fixed windows end a whole second from now.
    clock_.Advance(1s - Duration(clock_.now().time_since_epoch().count() % 1'000'000));
  }

  std::unique_ptr<Pending> Acquire(std::string_view body) {
    auto pending = std::make_unique<Pending>();
    api_.Handle({"POST", "/v1/acquire", body}, pending->exchange);
    return pending;
  }

  ManualClock clock_;
  ManualTimers timers_{clock_};
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
  Metrics metrics_;
  Api api_{store_, metrics_, RuleTable::Build(ParseRules(kRules), metrics_), nullptr, &timers_};
};

TEST_F(AcquireTest, AnswersWhenTheBookedSlotComes) {
  const auto first = Acquire(R"({"rule":"shaped","key":"partner","max_wait_ms":1000})");
  ASSERT_TRUE(first->done);
  EXPECT_EQ(first->exchange.response.status, 200);
  EXPECT_EQ(first->body(),
            R"({"outcome":"admitted","waited_ms":0,"decision":{"allowed":true,"limit":10,)"
            R"("remaining":0,"retry_after_ms":0,"reset_after_ms":100,"source":"store",)"
            R"("degraded":false}})");
  EXPECT_EQ(first->header("Server-Timing"), "ratelimit;dur=0.000");
  EXPECT_EQ(first->header("RateLimit-Policy"), R"("shaped";q=10;w=1)");

  const auto second = Acquire(R"({"rule":"shaped","key":"partner","cost":1,"max_wait_ms":1000})");
  const auto third = Acquire(R"({"rule":"shaped","key":"partner","max_wait_ms":1000})");
  EXPECT_FALSE(second->done);
  timers_.Advance(99ms);
  EXPECT_FALSE(second->done);  // never early
  timers_.Advance(1ms);
  ASSERT_TRUE(second->done);
  EXPECT_FALSE(third->done);
  EXPECT_EQ(second->body().substr(0, 40), R"({"outcome":"admitted","waited_ms":100,"d)");
  EXPECT_EQ(second->header("Server-Timing"), "ratelimit;dur=100.000");
  timers_.Advance(100ms);
  ASSERT_TRUE(third->done);
  EXPECT_EQ(third->header("Server-Timing"), "ratelimit;dur=200.000");
  EXPECT_EQ(metrics_.ForRule("shaped").allowed.load(), 3u);
}

TEST_F(AcquireTest, ASlotBeyondMaxWaitIsDeniedAtOnce) {
  Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":0})");
  const auto denied = Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":40})");
  ASSERT_TRUE(denied->done);
  EXPECT_EQ(denied->exchange.response.status, 200);
  EXPECT_EQ(denied->body().substr(0, 37), R"({"outcome":"denied","waited_ms":0,"de)");
  EXPECT_EQ(denied->header("Retry-After"), "1");  // 60 ms, in whole seconds rounded up
  EXPECT_EQ(denied->header("Server-Timing"), "ratelimit;dur=0.000");
}

TEST_F(AcquireTest, WindowRulesRetryWhenTheWindowTurns) {
  Acquire(R"({"rule":"window","key":"k","max_wait_ms":0})");
  const auto waiting = Acquire(R"({"rule":"window","key":"k","max_wait_ms":2000})");
  EXPECT_FALSE(waiting->done);
  timers_.Advance(1s);
  ASSERT_TRUE(waiting->done);
  EXPECT_EQ(waiting->body().substr(0, 43), R"({"outcome":"admitted","waited_ms":1000,"dec)");
}

TEST_F(AcquireTest, BadRequestsAreRefusedAndChangeNothing) {
  const std::string_view bad[] = {
      R"({"rule":"shaped","key":"k"})",                            // no max_wait_ms
      R"({"rule":"shaped","key":"k","max_wait_ms":-1})",           // negative
      R"({"rule":"shaped","key":"k","max_wait_ms":1.5})",          // not an integer
      R"({"rule":"shaped","key":"k","max_wait_ms":300001})",       // above kMaxAcquireWait
      R"({"rule":"nope","key":"k","max_wait_ms":10})",             // unknown rule
      R"({"rule":"shaped","key":"k","cost":2,"max_wait_ms":10})",  // above the burst
      R"({"rule":"shaped","key":"k","max_wait_ms":10,"extra":1})",
      R"([1])",
  };
  for (std::string_view body : bad) {
    const auto answer = Acquire(body);
    ASSERT_TRUE(answer->done) << body;
    EXPECT_EQ(answer->exchange.response.status, 400) << body;
  }
  Pending get;
  api_.Handle({"GET", "/v1/acquire", ""}, get.exchange);
  EXPECT_EQ(get.exchange.response.status, 405);
  // Nothing was consumed: the key is fresh.
  EXPECT_EQ(store_.size(), 0u);
}

TEST_F(AcquireTest, CancelWaitsAnswersEveryWaiterAtOnce) {
  Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":0})");
  const auto booked = Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":5000})");
  Acquire(R"({"rule":"window","key":"w","max_wait_ms":0})");
  const auto retrying = Acquire(R"({"rule":"window","key":"w","max_wait_ms":5000})");
  EXPECT_FALSE(booked->done);
  EXPECT_FALSE(retrying->done);
  api_.CancelWaits();
  ASSERT_TRUE(booked->done);
  ASSERT_TRUE(retrying->done);
  EXPECT_EQ(booked->body().substr(0, 34), R"({"outcome":"cancelled","waited_ms")");
  EXPECT_EQ(retrying->body().substr(0, 34), R"({"outcome":"cancelled","waited_ms")");
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST(AcquireWithoutTimers, IsNotServed) {
  MemoryStore store;
  Metrics metrics;
  Api api(store, metrics, RuleTable::Build(ParseRules(kRules), metrics));
  Pending answer;
  api.Handle({"POST", "/v1/acquire", R"({"rule":"shaped","key":"k","max_wait_ms":10})"},
             answer.exchange);
  ASSERT_TRUE(answer.done);
  EXPECT_EQ(answer.exchange.response.status, 501);
}

}  // namespace
}  // namespace sluice::http
