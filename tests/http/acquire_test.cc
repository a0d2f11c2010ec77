// POST /v1/acquire on the Api, with a MemoryStore and ManualTimers on one ManualClock: answers
// come when the slot comes (booked on the meters, retried on the windows), or with the denial,
// and carry Server-Timing; bad input is refused; the bounds on waiters answer queue_full;
// CancelWaits answers every waiter at once, on lines a reload replaced too, and refuses later
// acquires; Abandon cancels the acquire of a client that left.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "http/api.h"
#include "sluice/acquirer.h"
#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr std::string_view kRules = R"(
rules:
  - { name: shaped, algorithm: gcra, limit: 10, period: 1s, burst: 1 }
  - { name: window, algorithm: fixed_window, limit: 1, period: 1s }
  - { name: shadow, algorithm: gcra, limit: 10, period: 1s, burst: 1, shadow_mode: true }
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
    waits_ = api_.Handle({"POST", "/v1/acquire", body}, pending->exchange);
    return pending;
  }

  std::string Metric(std::string_view line_start) const {
    const std::string text = metrics_.Exposition();
    const size_t at = text.find(line_start);
    if (at == std::string::npos) return "<absent>";
    const size_t value = at + line_start.size() + 1;
    return text.substr(value, text.find('\n', value) - value);
  }

  bool waits_ = false;  // what the last Handle returned

  ManualClock clock_;
  ManualTimers timers_{clock_};
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
  Metrics metrics_;
  Api api_{store_, metrics_, RuleTable::Build(ParseRules(kRules), store_, metrics_), nullptr,
           &timers_};
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

// A rule in shadow mode admits every acquire, so none waits for a slot: each is decided as a
// check, answered admitted at once, its would-be verdict in the decision.
TEST_F(AcquireTest, AShadowAcquireIsAdmittedAtOnceWithItsWouldBeVerdict) {
  ASSERT_TRUE(Acquire(R"({"rule":"shadow","key":"k","max_wait_ms":1000})")->done);
  const auto over = Acquire(R"({"rule":"shadow","key":"k","max_wait_ms":1000})");
  EXPECT_FALSE(waits_);
  ASSERT_TRUE(over->done);
  EXPECT_EQ(over->body(),
            R"({"outcome":"admitted","waited_ms":0,"decision":{"allowed":true,"limit":10,)"
            R"("remaining":0,"retry_after_ms":100,"reset_after_ms":100,"source":"store",)"
            R"("degraded":false,"shadow":true,"would_allow":false}})");
  EXPECT_EQ(over->header("Retry-After"), "<absent>");
  EXPECT_EQ(Metric("sluice_acquires_total{rule=\"shadow\",outcome=\"admitted\"}"), "2");
  EXPECT_EQ(Metric("sluice_shadow_checks_total{rule=\"shadow\",result=\"denied\"}"), "1");
  EXPECT_EQ(Metric("sluice_acquire_waiters{rule=\"shadow\"}"), "0");
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

TEST_F(AcquireTest, DeniedAcquiresCountTheirKeyInTheTopKeys) {
  api_.SetExposeKeys(true);
  Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":0})");
  Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":40})");
  Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":40})");
  Pending top;
  api_.Handle({"GET", "/v1/top?rule=shaped", ""}, top.exchange);
  ASSERT_TRUE(top.done);
  EXPECT_EQ(json::parse(top.body()).at("keys"),
            json::parse(R"([{"key":"k","denied":2,"error":0}])"));
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
      R"({"rule":"shaped","key":"k","max_wait_ms":10,"max_wait_ms":0})",  // a key twice
      R"({"rule":"shaped","key":"k","cost":1,"max_wait_ms":10,"cost":0})",
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

TEST_F(AcquireTest, HandleSaysWhileTheAnswerWaitsAndAbandonCancelsIt) {
  const auto first = Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":1000})");
  ASSERT_TRUE(first->done);
  EXPECT_FALSE(waits_);           // answered at once
  api_.Abandon(first->exchange);  // nothing to abandon: the answer stands
  EXPECT_EQ(first->body().substr(0, 21), R"({"outcome":"admitted")");

  const auto waiting = Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":1000})");
  EXPECT_TRUE(waits_);
  EXPECT_FALSE(waiting->done);
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="shaped"})"), "1");
  api_.Abandon(waiting->exchange);
  ASSERT_TRUE(waiting->done);
  EXPECT_EQ(waiting->body().substr(0, 22), R"({"outcome":"cancelled")");
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="shaped"})"), "0");
  EXPECT_EQ(Metric(R"(sluice_acquires_total{rule="shaped",outcome="cancelled"})"), "1");
  EXPECT_EQ(Metric(R"(sluice_acquires_total{rule="shaped",outcome="admitted"})"), "1");
  EXPECT_EQ(timers_.pending(), 0u);

  Pending health;
  EXPECT_FALSE(api_.Handle({"GET", "/healthz", ""}, health.exchange));
  api_.Abandon(health.exchange);
  EXPECT_TRUE(health.done);
}

TEST_F(AcquireTest, CancelWaitsReachesLinesAReloadReplacedAndRefusesLaterAcquires) {
  Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":0})");
  const auto old_line = Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":5000})");
  EXPECT_FALSE(old_line->done);
  // The limit changes: new acquires go to a new line, the waiter stays on the old one.
  api_.SetRules(RuleTable::Build(ParseRules(R"(
rules:
  - { name: shaped, algorithm: gcra, limit: 5, period: 1s, burst: 1 }
)"),
                                 store_, metrics_));
  const auto new_line = Acquire(R"({"rule":"shaped","key":"k","max_wait_ms":5000})");
  EXPECT_FALSE(new_line->done);
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="shaped"})"), "2");

  api_.CancelWaits();
  ASSERT_TRUE(old_line->done);
  ASSERT_TRUE(new_line->done);
  EXPECT_EQ(old_line->body().substr(0, 22), R"({"outcome":"cancelled")");
  EXPECT_EQ(new_line->body().substr(0, 22), R"({"outcome":"cancelled")");
  EXPECT_EQ(timers_.pending(), 0u);
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="shaped"})"), "0");

  const auto late = Acquire(R"({"rule":"shaped","key":"other","max_wait_ms":5000})");
  ASSERT_TRUE(late->done);
  EXPECT_FALSE(waits_);
  EXPECT_EQ(late->exchange.response.status, 503);
  EXPECT_EQ(late->body(), R"({"error":"the service is stopping and takes no new acquires"})");
  EXPECT_EQ(timers_.pending(), 0u);
  // Checks are still answered while the service drains.
  Pending check;
  api_.Handle({"POST", "/v1/check", R"({"rule":"shaped","key":"other"})"}, check.exchange);
  EXPECT_EQ(check.exchange.response.status, 200);
}

TEST_F(AcquireTest, BoundsPerKeyPerRuleAndOverallAnswerQueueFull) {
  api_.SetRules(RuleTable::Build(ParseRules(R"(
rules:
  - { name: perkey, algorithm: gcra, limit: 10, period: 1s, burst: 1, max_waiters_per_key: 1 }
  - { name: small, algorithm: gcra, limit: 10, period: 1s, burst: 1, max_waiters: 1 }
)"),
                                 store_, metrics_));
  api_.SetMaxWaiters(3);
  std::vector<std::unique_ptr<Pending>> answers;
  const auto outcome = [&](std::string_view rule, std::string_view key) {
    answers.push_back(Acquire(R"({"rule":")" + std::string(rule) + R"(","key":")" +
                              std::string(key) + R"(","max_wait_ms":5000})"));
    if (!answers.back()->done) return std::string("waiting");
    return json::parse(answers.back()->body())["outcome"].get<std::string>();
  };
  EXPECT_EQ(outcome("perkey", "a"), "admitted");
  EXPECT_EQ(outcome("perkey", "a"), "waiting");
  EXPECT_EQ(outcome("perkey", "a"), "queue_full");  // one waiter per key
  EXPECT_EQ(outcome("small", "x"), "admitted");
  EXPECT_EQ(outcome("small", "x"), "waiting");
  EXPECT_EQ(outcome("small", "y"), "queue_full");  // one in progress for the whole rule
  EXPECT_EQ(outcome("perkey", "b"), "admitted");
  EXPECT_EQ(outcome("perkey", "b"), "waiting");
  EXPECT_EQ(outcome("perkey", "c"), "queue_full");  // three in progress in all
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="perkey"})"), "2");
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="small"})"), "1");
  EXPECT_EQ(Metric(R"(sluice_acquires_total{rule="perkey",outcome="queue_full"})"), "2");
  EXPECT_EQ(Metric(R"(sluice_acquires_total{rule="small",outcome="queue_full"})"), "1");

  timers_.Advance(100ms);  // every waiter's slot comes
  EXPECT_EQ(Metric(R"(sluice_acquire_waiters{rule="perkey"})"), "0");
  EXPECT_EQ(Metric(R"(sluice_acquires_total{rule="perkey",outcome="admitted"})"), "4");
  EXPECT_EQ(outcome("perkey", "c"), "admitted");
}

TEST(AcquireWithoutTimers, IsNotServed) {
  MemoryStore store;
  Metrics metrics;
  Api api(store, metrics, RuleTable::Build(ParseRules(kRules), store, metrics));
  Pending answer;
  api.Handle({"POST", "/v1/acquire", R"({"rule":"shaped","key":"k","max_wait_ms":10})"},
             answer.exchange);
  ASSERT_TRUE(answer.done);
  EXPECT_EQ(answer.exchange.response.status, 501);
}

}  // namespace
}  // namespace sluice::http
