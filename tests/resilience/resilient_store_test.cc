// ResilientStore's policies, breaker and hot-key cache on a manual clock, over a backend that
// fails on command. The same paths against a real, failing redis-server are in
// tests/redis/fault_test.cc.
#include "sluice/resilient_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sluice/leasing_store.h"
#include "sluice/limiter.h"
#include "sluice/timers.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

// A MemoryStore that answers with `failure` instead, while it is set (only in `failing_domain`
// when that is set too), and counts its calls. While `hold` is set, the answers (decided when the
// call comes) are held back until ReleaseHeld, as a slow backend's are. With
// `domain_per_first_byte`, a key's failure domain is its first byte, named "node-<byte>", like
// the masters of a cluster; otherwise the store is one domain.
class FailingStore final : public Store {
 public:
  explicit FailingStore(const Clock* clock, bool domain_per_first_byte = false)
      : memory_(MemoryStoreOptions{.clock = clock}),
        domain_per_first_byte_(domain_per_first_byte) {}

  Status failure;
  std::optional<uint32_t> failing_domain;
  std::atomic<int> calls{0};
  std::atomic<int64_t> lease_units{0};  // the lease units of the checks it got, summed
  bool hold = false;
  // Above zero: calls alternate between runs of this many that fail UNAVAILABLE and as many that
  // are answered, whatever `failure` says. Set before the calls start.
  int flap_every = 0;

  // Answers the oldest held call.
  void ReleaseHeld() {
    ASSERT_FALSE(held_.empty());
    auto answer = std::move(held_.front());
    held_.pop_front();
    answer();
  }

  uint32_t FailureDomain(std::string_view /*scope*/, std::string_view key) const override {
    return domain_per_first_byte_ && !key.empty() ? static_cast<uint8_t>(key[0]) : 0;
  }
  std::string FailureDomainName(uint32_t domain) const override {
    return "node-" + std::string(1, static_cast<char>(domain));
  }

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    const int first = calls.fetch_add(static_cast<int>(requests.size()));
    std::vector<Result<Decision>> results;
    for (const auto& r : requests) {
      lease_units.fetch_add(r.lease.units);
      const int call = first + static_cast<int>(results.size());
      if (flap_every > 0 && call / flap_every % 2 == 0) {
        results.push_back(Status::Unavailable("flapping"));
        continue;
      }
      const bool fails = !failure.ok() && (!failing_domain.has_value() ||
                                           FailureDomain(r.scope, r.key) == *failing_domain);
      results.push_back(fails ? Result<Decision>(failure) : memory_.Check(r));
    }
    if (!hold) return done(std::move(results));
    held_.push_back([done = std::move(done), results = std::move(results)]() mutable {
      done(std::move(results));
    });
  }
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override {
    memory_.ResetAsync(scope, key, std::move(done));
  }
  void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by, StatusCallback done) override {
    calls.fetch_add(1);
    if (!failure.ok()) return done(failure);
    memory_.GiveBackAsync(scope, limit, key, units, std::move(done), apply_by);
  }
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override {
    calls.fetch_add(static_cast<int>(requests.size()));
    const bool fails =
        !failure.ok() && std::any_of(requests.begin(), requests.end(), [&](const auto& r) {
          return !failing_domain.has_value() || FailureDomain(r.scope, r.key) == *failing_domain;
        });
    if (fails) return done(failure);
    memory_.CheckAllAsync(requests, std::move(done));
  }

 private:
  MemoryStore memory_;
  const bool domain_per_first_byte_;
  std::deque<std::function<void()>> held_;
};

const DomainBreakerStats* BreakerNamed(const StoreHealthStats& stats, std::string_view name) {
  auto it = std::find_if(stats.breakers.begin(), stats.breakers.end(),
                         [name](const auto& b) { return b.domain == name; });
  return it == stats.breakers.end() ? nullptr : &*it;
}

class ResilientStoreTest : public ::testing::Test {
 protected:
  Limit MakeLimit(int64_t count) {
    auto limit = Limit::Create(Algorithm::kFixedWindow, count, 10s);
    EXPECT_TRUE(limit.ok());
    return *limit;
  }

  ManualClock clock_;
  const ResilientStoreOptions options_{
      .clock = &clock_, .failures_to_open = 3, .open_for = 500ms, .instances = 4};
  FailingStore backend_{&clock_};
  ResilientStore store_{backend_, options_};
  // A backend of many domains: the first byte of a key picks its "master".
  FailingStore masters_{&clock_, /*domain_per_first_byte=*/true};
  ResilientStore per_master_{masters_, options_};
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

// A probe answered with an error that is no store failure says nothing of the store: the next
// call probes again, and the breaker does not stay half open.
TEST_F(ResilientStoreTest, ProbeAnsweredWithABadRequestLetsTheNextCallProbe) {
  Limiter limiter(store_, "api", MakeLimit(100), FailurePolicy::kFailClosed);
  backend_.failure = Status::Unavailable("down");
  for (int i = 0; i < 3; ++i) (void)limiter.Check("k");  // failures that open the breaker
  ASSERT_EQ(store_.breaker_state(), BreakerState::kOpen);

  clock_.Advance(500ms);
  backend_.failure = Status::InvalidArgument("refused by the backend");
  EXPECT_EQ(limiter.Check("k").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kHalfOpen);

  backend_.failure = Status();
  auto d = limiter.Check("k");
  EXPECT_EQ(d->source, DecisionSource::kStore);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kClosed);
}

// Only an outage is for the failure policy to decide. A full store or a fault of the store (a
// Lua script's error) comes back as the error under every policy, for the caller to refuse, and
// neither opens the breaker nor counts as a store error.
TEST_F(ResilientStoreTest, OnlyOutagesGoToTheFailurePolicy) {
  const Status errors[] = {
      Status::ResourceExhausted("memory store is full (1000 keys)"),
      Status::Internal("ERR user_script:12: attempt to compare nil with number"),
  };
  const FailurePolicy policies[] = {FailurePolicy::kFailOpen, FailurePolicy::kFailClosed,
                                    FailurePolicy::kLocalFallback};
  for (const Status& error : errors) {
    backend_.failure = error;
    for (const FailurePolicy policy : policies) {
      SCOPED_TRACE(error.ToString() + " under " + FailurePolicyName(policy));
      Limiter limiter(store_, FailurePolicyName(policy), MakeLimit(8), policy);
      for (int i = 0; i < 5; ++i) EXPECT_EQ(limiter.Check("k").status(), error);
      const KeyCost checks[] = {{"k", 1}, {"other", 1}};
      std::vector<Result<Decision>> results;
      limiter.CheckBatchAsync(checks, [&](auto r) { results = std::move(r); });
      ASSERT_EQ(results.size(), 2u);
      EXPECT_EQ(results[0].status(), error);
      EXPECT_EQ(results[1].status(), error);
    }
    const Limit limit = MakeLimit(8);
    Result<Decision> probed = Status::Unavailable("no answer");
    store_.ProbeAsync({.scope = "probe", .limit = &limit, .key = "p", .cost = 0},
                      [&](Result<Decision> r) { probed = std::move(r); });
    EXPECT_EQ(probed.status(), error);
  }
  const StoreHealthStats stats = store_.stats();
  EXPECT_EQ(stats.store_errors, 0u);
  EXPECT_EQ(stats.fail_open + stats.fail_closed + stats.local_fallback, 0u);
  EXPECT_EQ(stats.breaker, BreakerState::kClosed);
  EXPECT_EQ(stats.breaker_opens, 0u);
}

// The answer to a call sent before the breaker opened says nothing of the backend as it is now:
// a success that comes back late closes neither the open breaker nor the half-open one, whose
// probe alone does.
TEST_F(ResilientStoreTest, OnlyTheProbeClosesAnOpenBreaker) {
  Limiter limiter(store_, "api", MakeLimit(100), FailurePolicy::kFailClosed);
  std::vector<Result<Decision>> late;
  backend_.hold = true;
  for (int i = 0; i < 2; ++i) {  // sent while the backend answers; answered late
    limiter.CheckAsync("slow", 1, [&](Result<Decision> r) { late.push_back(std::move(r)); });
  }
  backend_.hold = false;
  backend_.failure = Status::Unavailable("down");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kFailClosed);
  ASSERT_EQ(store_.breaker_state(), BreakerState::kOpen);

  backend_.ReleaseHeld();
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0]->source, DecisionSource::kStore);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kOpen);
  const int calls = backend_.calls;
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kFailClosed);
  EXPECT_EQ(backend_.calls, calls);  // still no call while open

  // Half open, its probe in flight: the other late success does not close it either.
  backend_.failure = Status();
  clock_.Advance(500ms);
  backend_.hold = true;
  std::optional<Result<Decision>> probe;
  limiter.CheckAsync("k", 1, [&](Result<Decision> r) { probe = std::move(r); });
  backend_.hold = false;
  ASSERT_EQ(store_.breaker_state(), BreakerState::kHalfOpen);
  backend_.ReleaseHeld();
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kHalfOpen);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kFailClosed);  // one probe at a time

  backend_.ReleaseHeld();  // the probe
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ((*probe)->source, DecisionSource::kStore);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kClosed);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kStore);
}

// Nor do the failures of calls sent before the breaker opened count against it once its probe
// has closed it: they tell of the outage that opened it.
TEST_F(ResilientStoreTest, LateFailuresFromBeforeTheOutageDoNotReopenTheBreaker) {
  Limiter limiter(store_, "api", MakeLimit(100), FailurePolicy::kFailClosed);
  backend_.failure = Status::DeadlineExceeded("timed out");
  backend_.hold = true;
  std::vector<Result<Decision>> late;
  for (int i = 0; i < 3; ++i) {
    limiter.CheckAsync("slow", 1, [&](Result<Decision> r) { late.push_back(std::move(r)); });
  }
  backend_.hold = false;
  for (int i = 0; i < 3; ++i) (void)limiter.Check("k");  // failures that open the breaker
  ASSERT_EQ(store_.breaker_state(), BreakerState::kOpen);
  backend_.failure = Status();
  clock_.Advance(500ms);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kStore);  // the probe
  ASSERT_EQ(store_.breaker_state(), BreakerState::kClosed);

  for (int i = 0; i < 3; ++i) backend_.ReleaseHeld();
  ASSERT_EQ(late.size(), 3u);
  for (const auto& r : late) EXPECT_EQ(r->source, DecisionSource::kFailClosed);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kClosed);
  EXPECT_EQ(store_.stats().breaker_opens, 1u);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kStore);
}

// One failing master opens its own breaker only: the others go on deciding on the store, and
// their successes do not reset its count of failures.
TEST_F(ResilientStoreTest, EachFailureDomainHasItsOwnBreaker) {
  Limiter limiter(per_master_, "api", MakeLimit(100), FailurePolicy::kFailClosed);
  masters_.failure = Status::Unavailable("node a down");
  masters_.failing_domain = 'a';
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(limiter.Check("a1")->source, DecisionSource::kFailClosed);
    auto healthy = limiter.Check("b1");
    EXPECT_EQ(healthy->source, DecisionSource::kStore);
    EXPECT_TRUE(healthy->allowed);
  }
  StoreHealthStats stats = per_master_.stats();
  EXPECT_EQ(stats.breaker, BreakerState::kOpen);  // the worst
  EXPECT_EQ(stats.breaker_opens, 1u);
  ASSERT_EQ(stats.breakers.size(), 2u);
  const DomainBreakerStats* a = BreakerNamed(stats, "node-a");
  const DomainBreakerStats* b = BreakerNamed(stats, "node-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->state, BreakerState::kOpen);
  EXPECT_EQ(a->opens, 1u);
  EXPECT_EQ(b->state, BreakerState::kClosed);
  EXPECT_EQ(b->opens, 0u);

  // Open on a only: a batch sends b's request alone.
  const int calls = masters_.calls;
  const KeyCost checks[] = {{"a2", 1}, {"b2", 1}, {"a3", 1}};
  std::vector<Result<Decision>> results;
  limiter.CheckBatchAsync(checks, [&](auto r) { results = std::move(r); });
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0]->source, DecisionSource::kFailClosed);
  EXPECT_EQ(results[1]->source, DecisionSource::kStore);
  EXPECT_EQ(results[2]->source, DecisionSource::kFailClosed);
  EXPECT_EQ(masters_.calls, calls + 1);

  // a recovers: after open_for, its probe closes its breaker.
  masters_.failure = Status();
  clock_.Advance(500ms);
  auto d = limiter.Check("a1");
  EXPECT_EQ(d->source, DecisionSource::kStore);
  EXPECT_TRUE(d->allowed);
  stats = per_master_.stats();
  EXPECT_EQ(stats.breaker, BreakerState::kClosed);
  EXPECT_EQ(BreakerNamed(stats, "node-a")->state, BreakerState::kClosed);
}

// A readiness probe is gated by, and counts for, the breaker of its own key's domain.
TEST_F(ResilientStoreTest, ProbeTellsOfItsOwnDomain) {
  const Limit limit = MakeLimit(100);
  Limiter limiter(per_master_, "api", limit, FailurePolicy::kFailClosed);
  masters_.failure = Status::Unavailable("node a down");
  masters_.failing_domain = 'a';
  for (int i = 0; i < 3; ++i) (void)limiter.Check("a1");  // failures that open a's breaker
  const auto probe = [&](std::string_view key) {
    Result<Decision> answer = Status::Internal("no answer");
    per_master_.ProbeAsync({.scope = "probe", .limit = &limit, .key = key, .cost = 0},
                           [&](Result<Decision> r) { answer = std::move(r); });
    return answer;
  };
  const int calls = masters_.calls;
  EXPECT_EQ(probe("a-probe").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(masters_.calls, calls);  // the breaker answered
  EXPECT_TRUE(probe("b-probe").ok());

  masters_.failure = Status();
  clock_.Advance(500ms);
  EXPECT_TRUE(probe("a-probe").ok());
  EXPECT_EQ(per_master_.breaker_state(), BreakerState::kClosed);
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
    auto d = limiter.Check("hot", 2);
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

// The backend's retry_after is counted from when the request was sent, no later than when the
// backend decided: a slow answer does not make the cache deny past it.
TEST_F(ResilientStoreTest, HotKeyDenialsCountFromWhenTheRequestWasSent) {
  const Limit limit = MakeLimit(3);
  Limiter limiter(store_, "api", limit);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.Check("hot")->allowed);
  backend_.hold = true;
  std::optional<Result<Decision>> denial;
  store_.CheckAsync({.scope = "api", .limit = &limit, .key = "hot", .cost = 1},
                    [&denial](Result<Decision> d) { denial = std::move(d); });
  clock_.Advance(40ms);  // the answer's way back
  backend_.ReleaseHeld();
  backend_.hold = false;
  ASSERT_TRUE(denial && denial->ok() && !(*denial)->allowed);
  const Duration retry_after = (*denial)->retry_after;
  ASSERT_GT(retry_after, 40ms);
  clock_.Advance(retry_after - 40ms - 1us);
  auto cached = limiter.Check("hot");
  EXPECT_EQ(cached->source, DecisionSource::kHotKeyCache);
  EXPECT_EQ(cached->retry_after, 1us);
  clock_.Advance(1us);
  auto after = limiter.Check("hot");
  EXPECT_EQ(after->source, DecisionSource::kStore) << "retry_after has passed since the decision";
  EXPECT_TRUE(after->allowed);
}

// A cached denial says what the store said remained, and counts down the wait until more does
// (the RateLimit header's t), as the store would.
TEST_F(ResilientStoreTest, HotKeyDenialsCountDownTheWaitForMoreQuota) {
  auto limit = Limit::Create(Algorithm::kTokenBucket, 3, 3s);  // a token a second, 3 at most
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store_, "api", *limit);
  ASSERT_TRUE(limiter.Check("k", 3)->allowed);
  clock_.Advance(1200ms);
  auto denied = limiter.Check("k", 2);
  ASSERT_FALSE(denied->allowed);
  ASSERT_EQ(denied->source, DecisionSource::kStore);
  EXPECT_EQ(denied->remaining, 1);
  EXPECT_EQ(denied->replenish_after, 800ms);

  clock_.Advance(300ms);
  auto cached = limiter.Check("k", 2);
  ASSERT_EQ(cached->source, DecisionSource::kHotKeyCache);
  EXPECT_EQ(cached->remaining, 1);
  EXPECT_EQ(cached->replenish_after, 500ms);
  EXPECT_EQ(cached->retry_after, 500ms);
}

// A larger request's retry_after is later than the one cached: the store tells it exactly.
TEST_F(ResilientStoreTest, HotKeyCacheServesOnlyTheCostDenied) {
  auto limit = Limit::Create(Algorithm::kTokenBucket, 3, 3s);  // a token a second, 3 at most
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store_, "api", *limit);
  ASSERT_TRUE(limiter.Check("k", 3)->allowed);
  auto one = limiter.Check("k", 1);
  ASSERT_FALSE(one->allowed);
  EXPECT_EQ(one->retry_after, 1s);
  EXPECT_EQ(limiter.Check("k", 1)->source, DecisionSource::kHotKeyCache);

  auto two = limiter.Check("k", 2);
  ASSERT_FALSE(two->allowed);
  EXPECT_EQ(two->source, DecisionSource::kStore);
  EXPECT_EQ(two->retry_after, 2s);
  clock_.Advance(500ms);
  two = limiter.Check("k", 2);  // now the one cached
  EXPECT_EQ(two->source, DecisionSource::kHotKeyCache);
  EXPECT_EQ(two->retry_after, 1500ms);
  auto three = limiter.Check("k", 3);
  EXPECT_EQ(three->source, DecisionSource::kStore);
  EXPECT_EQ(three->retry_after, 2500ms);
}

// A reload that changes the rule's limit must not keep serving the old limit's denials.
TEST_F(ResilientStoreTest, HotKeyDenialsAreForgottenWhenTheLimitChanges) {
  Limiter before(store_, "api", MakeLimit(1));
  EXPECT_TRUE(before.Check("k")->allowed);
  EXPECT_FALSE(before.Check("k")->allowed);
  EXPECT_EQ(before.Check("k")->source, DecisionSource::kHotKeyCache);

  Limiter after(store_, "api", MakeLimit(5));  // same name, larger limit
  auto d = after.Check("k");
  EXPECT_EQ(d->source, DecisionSource::kStore);
  EXPECT_TRUE(d->allowed);
  // The old denial was dropped, not kept for the old limit either.
  EXPECT_EQ(before.Check("k")->source, DecisionSource::kStore);
}

// A full cache makes room for a new hot key: the keys not denied lately are evicted (with 16 keys
// of capacity, each of the cache's 16 shards holds one), so the newest denial is always served
// from the cache, and an evicted key is simply decided by the store again.
TEST_F(ResilientStoreTest, FullHotKeyCacheEvictsForNewHotKeys) {
  ResilientStore small(backend_, ResilientStoreOptions{.clock = &clock_, .hot_key_capacity = 16});
  auto limit = Limit::Create(Algorithm::kGcra, 1, std::chrono::hours(1));
  ASSERT_TRUE(limit.ok());
  Limiter limiter(small, "api", *limit);
  int from_store = 0;
  for (int i = 0; i < 64; ++i) {
    const std::string key = "k" + std::to_string(i);
    EXPECT_TRUE(limiter.Check(key)->allowed);
    EXPECT_EQ(limiter.Check(key)->source, DecisionSource::kStore);  // denied, and remembered
    const auto d = limiter.Check(key);
    EXPECT_FALSE(d->allowed);
    EXPECT_EQ(d->source, DecisionSource::kHotKeyCache) << key;
  }
  for (int i = 0; i < 64; ++i) {
    const auto d = limiter.Check("k" + std::to_string(i));
    EXPECT_FALSE(d->allowed);
    from_store += d->source == DecisionSource::kStore;
  }
  EXPECT_GE(from_store, 64 - 16);  // at most 16 keys held
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

// Units given back may admit what the hot-key cache denied: the give-back goes to the backend and
// the key's denial is dropped.
TEST_F(ResilientStoreTest, GiveBackGoesToTheBackendAndForgetsTheHotKey) {
  const Limit limit = Limit::Create(Algorithm::kGcra, 1, 10s).value();
  Limiter limiter(store_, "api", limit);
  EXPECT_TRUE(limiter.Check("k")->allowed);
  EXPECT_FALSE(limiter.Check("k")->allowed);
  EXPECT_EQ(limiter.Check("k")->source, DecisionSource::kHotKeyCache);
  const int calls = backend_.calls.load();
  Status async = Status::Internal("callback not run");
  store_.GiveBackAsync("api", limit, "k", 1, [&](Status s) { async = std::move(s); });
  EXPECT_TRUE(async.ok()) << async.ToString();
  EXPECT_EQ(backend_.calls.load(), calls + 1);
  const Result<Decision> after = limiter.Check("k");
  EXPECT_TRUE(after->allowed);
  EXPECT_EQ(after->source, DecisionSource::kStore);
}

// No failure policy for a give-back: an outage comes back as its error, and a bad request is
// refused before the backend.
TEST_F(ResilientStoreTest, GiveBackInAnOutageIsItsError) {
  const Limit limit = Limit::Create(Algorithm::kTokenBucket, 2, 10s).value();
  backend_.failure = Status::Unavailable("connection refused");
  EXPECT_EQ(store_.GiveBack("api", limit, "k", 1), backend_.failure);
  const int calls = backend_.calls.load();
  EXPECT_EQ(store_.GiveBack("api", limit, "k", 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.calls.load(), calls);
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

// A LeasingStore under a ResilientStore (as `sluice serve` stacks them) sees each check's lease
// terms, whichever path the check takes.
TEST_F(ResilientStoreTest, LeaseTermsPassThroughToTheBackend) {
  Limiter limiter(store_, "hot", MakeLimit(8), FailurePolicy::kFailOpen,
                  LeaseTerms{.units = 4, .lifetime = 100ms});
  EXPECT_TRUE(limiter.Check("k")->allowed);
  EXPECT_EQ(backend_.lease_units, 4);
  // The asynchronous batch path, which copies each request.
  const KeyCost check{.key = "k"};
  std::vector<Result<Decision>> results;
  limiter.CheckBatchAsync({&check, 1}, [&](auto r) { results = std::move(r); });
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(backend_.lease_units, 8);
}

// A half-open breaker's probe must reach the store: it goes without its lease terms, so that a
// LeasingStore below cannot answer it from a lease, and close the breaker on a store still down.
TEST_F(ResilientStoreTest, AProbeIsNeverAnsweredFromALease) {
  ManualTimers timers(clock_);
  LeasingStore leasing(backend_, timers);
  ResilientStore store(leasing, options_);
  const Limit limit = MakeLimit(100);
  const CheckRequest hot{.scope = "api",
                         .limit = &limit,
                         .key = "hot",
                         .cost = 1,
                         .lease = {.units = 10, .lifetime = 10s}};
  ASSERT_TRUE(store.Check(hot)->allowed);
  ASSERT_EQ(leasing.lease_stats().taken, 1u);
  backend_.failure = Status::Unavailable("redis down");
  for (int i = 0; i < options_.failures_to_open; ++i) {
    (void)store.Check({.scope = "api", .limit = &limit, .key = "cold", .cost = 1});
  }
  ASSERT_EQ(store.breaker_state(), BreakerState::kOpen);
  timers.Advance(options_.open_for);
  const int calls = backend_.calls.load();
  auto probe = store.Check(hot);
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(probe->degraded()) << "the store is down: the policy decided";
  EXPECT_EQ(backend_.calls.load(), calls + 1) << "the probe reached the store";
  EXPECT_EQ(store.breaker_state(), BreakerState::kOpen) << "its failure opened the breaker again";
  backend_.failure = Status::Ok();
}

// A lease take that fails answers every check that waited on it: one failed call of the store,
// one failure for the breaker, however many checks it fails.
TEST_F(ResilientStoreTest, AFailedLeaseTakeIsOneFailureHoweverManyChecksWaitedOnIt) {
  ManualTimers timers(clock_);
  LeasingStore leasing(backend_, timers);
  ResilientStore store(leasing, options_);
  const Limit limit = MakeLimit(100);
  const CheckRequest hot{.scope = "api",
                         .limit = &limit,
                         .key = "hot",
                         .cost = 1,
                         .lease = {.units = 10, .lifetime = 10s}};
  backend_.failure = Status::Unavailable("redis down");
  backend_.hold = true;
  std::vector<Result<Decision>> answers;
  constexpr int kWaiting = 5;
  for (int i = 0; i < kWaiting; ++i) {
    store.CheckAsync(hot, [&](Result<Decision> d) { answers.push_back(std::move(d)); });
  }
  ASSERT_EQ(backend_.calls.load(), 1) << "one take for every check";
  backend_.ReleaseHeld();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kWaiting));
  for (const auto& d : answers) EXPECT_EQ(d->source, DecisionSource::kFailOpen);
  EXPECT_EQ(store.breaker_state(), BreakerState::kClosed) << "one failed call";
  EXPECT_EQ(store.stats().store_errors, static_cast<uint64_t>(kWaiting));

  // The next takes fail as calls of their own: the breaker opens at failures_to_open of them.
  backend_.hold = false;
  for (int i = 1; i < options_.failures_to_open; ++i) {
    EXPECT_EQ(store.breaker_state(), BreakerState::kClosed) << i << " failed call(s)";
    EXPECT_TRUE(store.Check(hot)->degraded());
  }
  EXPECT_EQ(store.breaker_state(), BreakerState::kOpen);
  backend_.failure = Status::Ok();
}

// Lease terms are the shared limit's: the local fallback decides on its share without them, even
// when the lease is larger than the share.
TEST_F(ResilientStoreTest, LocalFallbackDecidesLeasedChecksOnItsShare) {
  backend_.failure = Status::Unavailable("redis down");
  // 8 shared by 4 instances: this one admits 2 on its own; a lease of 4 is more than that.
  Limiter limiter(store_, "hot", MakeLimit(8), FailurePolicy::kLocalFallback,
                  LeaseTerms{.units = 4, .lifetime = 100ms});
  int admitted = 0;
  for (int i = 0; i < 2; ++i) {
    auto d = limiter.Check("k");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
    admitted += d->allowed;
  }
  EXPECT_EQ(admitted, 2);
  const std::vector<KeyCost> checks(3, KeyCost{.key = "j"});
  std::vector<Result<Decision>> results;
  limiter.CheckBatchAsync(checks, [&](auto r) { results = std::move(r); });
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0]->allowed);
  EXPECT_TRUE(results[1]->allowed);
  EXPECT_FALSE(results[2]->allowed);
  EXPECT_EQ(results[2]->source, DecisionSource::kLocalFallback);
}

// Threads deciding, synchronously and not, while the backend flaps between failing and
// answering and the clock runs (each check moves it 100 us): the breaker opens and closes under
// the load (the sanitizer builds check its state for races), and every decision is made, by the
// store or by the policy.
TEST(ResilientStoreConcurrency, BreakerUnderAFlappingBackend) {
  ManualClock clock;
  FailingStore backend(&clock);
  backend.flap_every = 7;
  ResilientStore store(
      backend, ResilientStoreOptions{
                   .clock = &clock, .failures_to_open = 3, .open_for = 1ms, .hot_key_capacity = 0});
  auto limit = Limit::Create(Algorithm::kFixedWindow, Limit::kMaxCount, 1s);
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store, "api", *limit, FailurePolicy::kFailClosed);
  constexpr int kThreads = 4;
  constexpr int kChecks = 3000;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "k" + std::to_string(t);
      for (int i = 0; i < kChecks; ++i) {
        clock.Advance(100us);
        if (i % 2 == 0) {
          errors += !limiter.Check(key).ok();
        } else {
          limiter.CheckAsync(key, 1, [&](Result<Decision> d) { errors += !d.ok(); });
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  const StoreHealthStats stats = store.stats();
  EXPECT_EQ(stats.store + stats.fail_closed, static_cast<uint64_t>(kThreads * kChecks));
  EXPECT_GT(stats.store, 0u);
  EXPECT_GT(stats.fail_closed, 0u);
  EXPECT_GT(stats.breaker_opens, 0u);
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

namespace sluice {
namespace {

using namespace std::chrono_literals;

class ResilientCheckAllTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  const ResilientStoreOptions options_{
      .clock = &clock_, .failures_to_open = 2, .open_for = 500ms, .instances = 2};
  // The first byte of a key picks its domain.
  FailingStore backend_{&clock_, /*domain_per_first_byte=*/true};
  ResilientStore store_{backend_, options_};
  const Limit limit_ = *Limit::Create(Algorithm::kFixedWindow, 4, 10s);

  std::vector<CheckRequest> Requests(FailurePolicy a, FailurePolicy b) const {
    return {{.scope = "x", .limit = &limit_, .key = "a1", .on_error = a},
            {.scope = "y", .limit = &limit_, .key = "b1", .on_error = b}};
  }
};

TEST_F(ResilientCheckAllTest, AHealthyBackendDecidesAllOrNothing) {
  const auto requests = Requests(FailurePolicy::kFailOpen, FailurePolicy::kFailOpen);
  for (int i = 0; i < 4; ++i) {
    auto all = store_.CheckAll(requests);
    ASSERT_TRUE(all.ok());
    EXPECT_TRUE((*all)[0].allowed && (*all)[1].allowed);
    EXPECT_EQ((*all)[0].source, DecisionSource::kStore);
  }
  auto refused = store_.CheckAll(requests);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE((*refused)[0].allowed || (*refused)[1].allowed);
  EXPECT_EQ(store_.stats().store, 10u);
}

// An outage of one key's domain puts the whole call to the policies, as one: fail_open admits
// with a fail_open partner, and a fail_closed partner denies both.
TEST_F(ResilientCheckAllTest, AnOutageIsDecidedByThePoliciesTogether) {
  backend_.failure = Status::Unavailable("master b down");
  backend_.failing_domain = 'b';
  auto open = store_.CheckAll(Requests(FailurePolicy::kFailOpen, FailurePolicy::kFailOpen));
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE((*open)[0].allowed && (*open)[1].allowed);
  EXPECT_EQ((*open)[1].source, DecisionSource::kFailOpen);
  auto closed = store_.CheckAll(Requests(FailurePolicy::kFailOpen, FailurePolicy::kFailClosed));
  ASSERT_TRUE(closed.ok());
  EXPECT_FALSE((*closed)[0].allowed || (*closed)[1].allowed);
  EXPECT_EQ((*closed)[0].source, DecisionSource::kFailOpen);
  EXPECT_EQ((*closed)[1].source, DecisionSource::kFailClosed);
  EXPECT_EQ((*closed)[1].retry_after, 500ms);
  // Two failures opened the breakers of the call's domains: nothing reaches the backend now.
  const int calls = backend_.calls.load();
  auto local =
      store_.CheckAll(Requests(FailurePolicy::kLocalFallback, FailurePolicy::kLocalFallback));
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(backend_.calls.load(), calls);
  EXPECT_TRUE((*local)[0].allowed && (*local)[1].allowed);
  EXPECT_EQ((*local)[0].source, DecisionSource::kLocalFallback);
  EXPECT_EQ((*local)[0].limit, 4);
  // Each instance's share is 2: the third call is refused by the local fallback, both of them.
  EXPECT_TRUE(
      store_.CheckAll(Requests(FailurePolicy::kLocalFallback, FailurePolicy::kLocalFallback))
          ->at(1)
          .allowed);
  auto third =
      store_.CheckAll(Requests(FailurePolicy::kLocalFallback, FailurePolicy::kLocalFallback));
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE((*third)[0].allowed || (*third)[1].allowed);
}

// Leased checks decided together during an outage: on the shares, without the shared limit's
// lease terms (4 units, twice a share of 2).
TEST_F(ResilientCheckAllTest, TheLocalFallbackDecidesLeasedChecksOnTheShares) {
  backend_.failure = Status::Unavailable("redis down");
  auto requests = Requests(FailurePolicy::kLocalFallback, FailurePolicy::kLocalFallback);
  for (CheckRequest& r : requests) r.lease = {.units = 4, .lifetime = 100ms};
  for (bool admitted : {true, true, false}) {
    auto all = store_.CheckAll(requests);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ((*all)[0].allowed && (*all)[1].allowed, admitted);
    EXPECT_EQ((*all)[0].source, DecisionSource::kLocalFallback);
  }
}

TEST_F(ResilientCheckAllTest, ErrorsThatAreNotOutagesAreReturned) {
  backend_.failure = Status::Internal("ERR user_script:1: boom");
  auto all = store_.CheckAll(Requests(FailurePolicy::kFailOpen, FailurePolicy::kFailOpen));
  EXPECT_EQ(all.status(), backend_.failure);
  EXPECT_EQ(store_.stats().store_errors, 0u);
  EXPECT_EQ(store_.breaker_state(), BreakerState::kClosed);
}

}  // namespace
}  // namespace sluice
