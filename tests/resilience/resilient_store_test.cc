// ResilientStore's policies, breaker and hot-key cache on a manual clock, over a backend that
// fails on command. The same paths against a real, failing redis-server are in
// tests/redis/fault_test.cc.
#include "sluice/resilient_store.h"

#include <gtest/gtest.h>

#include <atomic>

#include "sluice/limiter.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

// A MemoryStore that answers with `failure` instead, while it is set, and counts its calls.
class FailingStore final : public Store {
 public:
  explicit FailingStore(const Clock* clock) : memory_(MemoryStoreOptions{.clock = clock}) {}

  Status failure;
  std::atomic<int> calls{0};

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    calls += static_cast<int>(requests.size());
    if (!failure.ok()) return done(std::vector<Result<Decision>>(requests.size(), failure));
    memory_.CheckBatchAsync(requests, std::move(done));
  }
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override {
    memory_.ResetAsync(scope, key, std::move(done));
  }

 private:
  MemoryStore memory_;
};

class ResilientStoreTest : public ::testing::Test {
 protected:
  Limit MakeLimit(int64_t count) {
    auto limit = Limit::Create(Algorithm::kFixedWindow, count, 10s);
    EXPECT_TRUE(limit.ok());
    return *limit;
  }

  ManualClock clock_;
  FailingStore backend_{&clock_};
  ResilientStore store_{
      backend_, ResilientStoreOptions{
                    .clock = &clock_, .failures_to_open = 3, .open_for = 500ms, .instances = 4}};
};

TEST_F(ResilientStoreTest, HealthyBackendDecides) {
  Limiter limiter(store_, "api", MakeLimit(2));
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kStore);
  EXPECT_TRUE(limiter.Check("k")->allowed);
  EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_EQ(store_.stats().store, 3u);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kClosed);
}

TEST_F(ResilientStoreTest, EachPolicyDecidesWhenTheBackendFails) {
  backend_.failure = Status::Unavailable("redis down");
  Limiter open(store_, "open", MakeLimit(8), FailurePolicy::kFailOpen);
  Limiter closed(store_, "closed", MakeLimit(8), FailurePolicy::kFailClosed);
  Limiter local(store_, "local", MakeLimit(8), FailurePolicy::kLocalFallback);

  auto d = open.Check("k");
  EXPECT_TRUE(d->allowed);
  EXPECT_TRUE(d->degraded());
  EXPECT_EQ(d->source, DecisionSource::kFailOpen);

  d = closed.Check("k");
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->source, DecisionSource::kFailClosed);
  EXPECT_EQ(d->retry_after, 500ms);

  // 8 shared by 4 instances: this one admits 2 on its own.
  int admitted = 0;
  for (int i = 0; i < 6; ++i) {
    d = local.Check("k");
    EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
    EXPECT_EQ(d->limit, 8);
    admitted += d->allowed;
  }
  EXPECT_EQ(admitted, 2);
  const auto stats = store_.stats();
  EXPECT_EQ(stats.fail_open, 1u);
  EXPECT_EQ(stats.fail_closed, 1u);
  EXPECT_EQ(stats.local_fallback, 6u);
}

TEST_F(ResilientStoreTest, BadRequestsAreNotStoreFailures) {
  Limiter limiter(store_, "api", MakeLimit(2), FailurePolicy::kFailOpen);
  EXPECT_EQ(limiter.Check("k", 3).status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_EQ(limiter.Check("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.stats().store_errors, 0u);
  EXPECT_EQ(backend_.calls.load(), 0);
}

TEST_F(ResilientStoreTest, BreakerOpensProbesAndCloses) {
  Limiter limiter(store_, "api", MakeLimit(100), FailurePolicy::kFailClosed);
  backend_.failure = Status::DeadlineExceeded("slow");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kFailClosed);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kOpen);
  EXPECT_EQ(backend_.calls.load(), 3);

  // Open: no backend call at all.
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_EQ(backend_.calls.load(), 3);

  // After open_for, one probe; it fails, so the breaker opens again.
  clock_.Advance(500ms);
  EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_EQ(backend_.calls.load(), 4);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kOpen);
  EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_EQ(backend_.calls.load(), 4);

  // The backend recovers: the next probe succeeds and closes the breaker.
  backend_.failure = Status();
  clock_.Advance(500ms);
  auto d = limiter.Check("k");
  EXPECT_EQ(d->source, DecisionSource::kStore);
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kClosed);
  EXPECT_EQ(store_.stats().breaker_opens, 2u);
}

TEST_F(ResilientStoreTest, HotKeysAreDeniedLocallyUntilRetryAfter) {
  Limiter limiter(store_, "api", MakeLimit(3));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Check("hot", 1)->allowed);
  auto first_denial = limiter.Check("hot", 2);
  ASSERT_FALSE(first_denial->allowed);
  EXPECT_EQ(first_denial->source, DecisionSource::kStore);
  const int calls = backend_.calls.load();

  clock_.Advance(1s);
  for (int i = 0; i < 100; ++i) {
    auto d = limiter.Check("hot", 2 + i % 2);  // as large or larger: known to be denied
    ASSERT_FALSE(d->allowed);
    EXPECT_EQ(d->source, DecisionSource::kHotKeyCache);
    EXPECT_EQ(d->retry_after, first_denial->retry_after - 1s);
  }
  EXPECT_EQ(backend_.calls.load(), calls);
  EXPECT_EQ(store_.stats().hot_key_cache, 100u);

  // A smaller request is not known to be denied: it goes to the store.
  EXPECT_EQ(limiter.Check("hot", 1)->source, DecisionSource::kStore);
  // Once retry_after has passed, the store decides again, and admits.
  clock_.Advance(first_denial->retry_after - 1s);
  auto after = limiter.Check("hot", 2);
  EXPECT_EQ(after->source, DecisionSource::kStore);
  EXPECT_TRUE(after->allowed);
}

TEST_F(ResilientStoreTest, CacheNeverAdmitsMoreThanTheBackend) {
  FailingStore plain_backend(&clock_);
  Limiter with_cache(store_, "api", MakeLimit(5));
  Limiter without(plain_backend, "api", MakeLimit(5));
  int admitted_with = 0, admitted_without = 0;
  for (int i = 0; i < 400; ++i) {
    clock_.Advance(97ms);
    const int64_t cost = i % 3;
    admitted_with += with_cache.Check("k", cost)->allowed && cost > 0;
    admitted_without += without.Check("k", cost)->allowed && cost > 0;
  }
  EXPECT_EQ(admitted_with, admitted_without);
  EXPECT_GT(store_.stats().hot_key_cache, 0u);
}

TEST_F(ResilientStoreTest, ResetForgetsTheHotKey) {
  Limiter limiter(store_, "api", MakeLimit(1));
  EXPECT_TRUE(limiter.Check("k")->allowed);
  EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kHotKeyCache);
  ASSERT_TRUE(limiter.Reset("k").ok());
  EXPECT_TRUE(limiter.Check("k")->allowed);
}

TEST_F(ResilientStoreTest, AsyncBatchMixesCacheBackendAndPolicy) {
  const Limit limit = MakeLimit(1);
  Limiter limiter(store_, "api", limit, FailurePolicy::kFailClosed);
  EXPECT_TRUE(limiter.Check("a")->allowed);
  EXPECT_FALSE(limiter.Check("a")->allowed);  // now cached
  const KeyCost checks[] = {{"a", 1}, {"b", 1}, {"", 1}, {"b", 1}};
  std::vector<Result<Decision>> results;
  limiter.CheckBatchAsync(checks, [&](auto r) { results = std::move(r); });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0]->source, DecisionSource::kHotKeyCache);
  EXPECT_TRUE(results[1]->allowed);
  EXPECT_EQ(results[2].status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(results[3]->allowed);
  EXPECT_EQ(results[3]->source, DecisionSource::kStore);

  backend_.failure = Status::Unavailable("down");
  const KeyCost during_outage[] = {{"a", 1}, {"b", 1}, {"c", 1}};
  limiter.CheckBatchAsync(during_outage, [&](auto r) { results = std::move(r); });
  EXPECT_EQ(results[0]->source, DecisionSource::kHotKeyCache);  // known: no backend call
  EXPECT_EQ(results[1]->source, DecisionSource::kHotKeyCache);
  EXPECT_EQ(results[2]->source, DecisionSource::kFailClosed);
}

TEST_F(ResilientStoreTest, ReservationsPassThroughAndSkipTheHotKeyCache) {
  auto limit = Limit::Create(Algorithm::kGcra, 1, 1s);  // one per second, no burst
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store_, "shaped", *limit);
  EXPECT_TRUE(limiter.Check("k")->allowed);
  EXPECT_FALSE(limiter.Check("k")->allowed);  // now a hot key
  const int calls = backend_.calls;

  auto booked = limiter.Reserve("k", 1, 2s);  // the backend books the next slot
  ASSERT_TRUE(booked.ok()) << booked.status().ToString();
  EXPECT_TRUE(booked->allowed);
  EXPECT_EQ(booked->delay, 1s);
  EXPECT_EQ(booked->source, DecisionSource::kStore);
  EXPECT_EQ(backend_.calls, calls + 1);

  // The same through the asynchronous batch path, which copies each request.
  const KeyCost reservation{.key = "k", .cost = 1, .max_delay = 3s};
  std::vector<Result<Decision>> results;
  limiter.CheckBatchAsync({&reservation, 1}, [&](auto r) { results = std::move(r); });
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok());
  EXPECT_TRUE(results[0]->allowed);
  EXPECT_EQ(results[0]->delay, 2s);

  auto too_far = limiter.Reserve("k", 1, 1s);  // the next free slot is 3 s away
  ASSERT_TRUE(too_far.ok());
  EXPECT_FALSE(too_far->allowed);
  EXPECT_EQ(too_far->source, DecisionSource::kStore);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kHotKeyCache);
}

TEST_F(ResilientStoreTest, LocalFallbackBooksOnItsShare) {
  backend_.failure = Status::Unavailable("redis down");
  auto limit = Limit::Create(Algorithm::kGcra, 4, 1s);  // 4 per second, 1 each on 4 instances
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store_, "shaped", *limit, FailurePolicy::kLocalFallback);
  EXPECT_EQ(limiter.Check("k")->delay, 0s);
  auto booked = limiter.Reserve("k", 1, 2s);
  ASSERT_TRUE(booked.ok());
  EXPECT_TRUE(booked->allowed);
  EXPECT_EQ(booked->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(booked->delay, 1s);  // the local share's rate: one per second
}

TEST(FailurePolicy, NamesRoundTrip) {
  for (auto p :
       {FailurePolicy::kFailOpen, FailurePolicy::kFailClosed, FailurePolicy::kLocalFallback}) {
    EXPECT_EQ(*ParseFailurePolicy(FailurePolicyName(p)), p);
  }
  EXPECT_EQ(ParseFailurePolicy("open").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice
