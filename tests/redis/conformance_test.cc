// RedisStore decides exactly as MemoryStore: the same traces of (time, key, cost), hand-written
// edge cases and seeded random ones, through both stores on one ManualClock (RedisStore sends
// it as the caller's clock) give identical decisions for every algorithm, also when the limit
// changes between calls on a key (a rule reloaded) and when the clock steps back. The traces'
// keys are chosen to land on every node of the target (each master of a Redis Cluster), and each
// test checks that its keys were found on every node.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "sluice/memory_store.h"
#include "sluice/redis_store.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

struct Step {
  Duration advance;  // before the check; negative: the clock steps back
  int key;
  int64_t cost;
  Duration max_delay{0};         // a reservation (meters only)
  const Limit* limit = nullptr;  // another limit than the trace's (a rule changed)
};

std::string DescribeDecision(const Result<Decision>& r) {
  if (!r.ok()) return r.status().ToString();
  return std::string(r->allowed ? "allowed" : "denied") +
         " remaining=" + std::to_string(r->remaining) +
         " retry_after=" + std::to_string(r->retry_after.count()) +
         " reset_after=" + std::to_string(r->reset_after.count()) +
         " replenish_after=" + std::to_string(r->replenish_after.count()) +
         " delay=" + std::to_string(r->delay.count());
}

class ConformanceTest : public RedisStoreTest {
 protected:
  void SetUp() override {
    RedisStoreTest::SetUp();
    if (HasFatalFailure()) return;
    // The ManualClock stands still while real time passes: keys must outlive the test.
    redis_ = MakeStore({.clock = &clock_, .expiry_margin = 10min});
    ASSERT_NE(redis_, nullptr);
    keys_ = KeysOnEveryNode(*target_, "k", kKeys);
    ASSERT_EQ(keys_.size(), kKeys);
  }

  void TearDown() override {
    if (!HasFatalFailure()) ExpectKeysOnEveryNode(*target_, prefix_ + "*");
    RedisStoreTest::TearDown();
  }

  // Runs `trace` through both stores under a scope of its own; every decision must match. The
  // decisions are appended to `decisions` when given.
  void RunTrace(const Limit& trace_limit, const std::vector<Step>& trace, const std::string& what,
                std::vector<Decision>* decisions = nullptr) {
    const std::string scope = "s" + std::to_string(traces_++);
    for (size_t i = 0; i < trace.size(); ++i) {
      clock_.Advance(trace[i].advance);
      const std::string& key = keys_[trace[i].key];
      const Limit& limit = trace[i].limit != nullptr ? *trace[i].limit : trace_limit;
      const CheckRequest request{.scope = scope,
                                 .limit = &limit,
                                 .key = key,
                                 .cost = trace[i].cost,
                                 .max_delay = trace[i].max_delay};
      const Result<Decision> expected = memory_.Check(request);
      const Result<Decision> got = redis_->Check(request);
      if (expected.ok() && expected->delay.count() > 0) ++booked_;
      ASSERT_TRUE(expected.ok() && got.ok() && *expected == *got)
          << what << " " << AlgorithmName(limit.algorithm()) << " count=" << limit.count()
          << " period=" << limit.period().count() << "us capacity=" << limit.capacity() << ", step "
          << i << " (t=" << clock_.now().time_since_epoch().count() << " key=" << key
          << " cost=" << trace[i].cost << " max_delay=" << trace[i].max_delay.count()
          << ")\n  memory: " << DescribeDecision(expected)
          << "\n  redis:  " << DescribeDecision(got);
      if (decisions != nullptr) decisions->push_back(*got);
    }
  }

  // A step of a random trace under `limit`: often at the same instant, else a fraction of the
  // period on, a whole one or several; a cost of 1 mostly, sometimes 0 (a peek), anything up to
  // the capacity, or all of it.
  static Step RandomStep(std::mt19937_64& rng, const Limit& limit) {
    const int64_t period = limit.period().count();
    const int64_t cap = limit.capacity();
    Step step{0us, static_cast<int>(rng() % kKeys), 1};
    const uint64_t dice = rng() % 100;
    if (dice < 30) {
      step.advance = 0us;
    } else if (dice < 75) {
      step.advance = Duration(1 + rng() % std::max<int64_t>(period / 10, 1));
    } else if (dice < 97) {
      step.advance = Duration(1 + rng() % period);
    } else {
      step.advance = Duration(period + rng() % (3 * period));
    }
    const uint64_t cost_dice = rng() % 100;
    if (cost_dice < 10) {
      step.cost = 0;
    } else if (cost_dice < 70) {
      step.cost = 1;
    } else if (cost_dice < 95) {
      step.cost = 1 + static_cast<int64_t>(rng() % cap);
    } else {
      step.cost = cap;
    }
    return step;
  }

  static std::vector<Limit> LimitsOf(Algorithm algorithm) {
    std::vector<Limit> limits;
    auto add = [&](int64_t count, Duration period, std::optional<int64_t> burst = std::nullopt) {
      auto limit = Limit::Create(algorithm, count, period, burst);
      ASSERT_TRUE(limit.ok()) << limit.status().ToString();
      limits.push_back(*limit);
    };
    add(5, 1s);
    add(3, 10s);  // emission interval 3'333'334us: not a divisor of the period
    add(1, 1ms);
    add(7, 999'983us);  // a prime period
    add(1000, 1h);
    // The largest values: sliding_window's products then exceed 2^53 and round.
    add(algorithm == Algorithm::kSlidingLog ? Limit::kMaxSlidingLogCount : Limit::kMaxCount,
        Duration(30'000'000'000'000));
    if (IsMeter(algorithm)) {
      add(10, 1s, 3);
      add(2, 1s, 50);
    }
    return limits;
  }

  // Checks sent one after another without waiting, so that they coalesce, each decided by
  // MemoryStore too at the clock's time when sent; ExpectAsMemory waits for their decisions.
  class Burst {
   public:
    Burst(RedisStore& store, MemoryStore& memory) : store_(store), memory_(memory) {}

    void Send(const CheckRequest& request, std::string step) {
      size_t i;
      {
        std::lock_guard lock(mu_);
        i = got_.size();
        got_.emplace_back(Status::Internal("no reply"));
      }
      expected_.push_back(memory_.Check(request));
      steps_.push_back(std::move(step));
      store_.CheckAsync(request, [this, i](Result<Decision> d) {
        std::lock_guard lock(mu_);
        got_[i] = std::move(d);
        ++answered_;
        cv_.notify_all();
      });
    }

    size_t size() const { return steps_.size(); }

    void ExpectAsMemory(const std::string& what) {
      std::unique_lock lock(mu_);
      const size_t n = got_.size();
      ASSERT_TRUE(cv_.wait_for(lock, 30s, [&] { return answered_ == n; }));
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(expected_[i].ok() && got_[i].ok() && *expected_[i] == *got_[i])
            << what << ", check " << i << " of " << n << " (" << steps_[i]
            << ")\n  memory: " << DescribeDecision(expected_[i])
            << "\n  redis:  " << DescribeDecision(got_[i]);
      }
    }

   private:
    RedisStore& store_;
    MemoryStore& memory_;
    std::vector<Result<Decision>> expected_;
    std::vector<std::string> steps_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Result<Decision>> got_;  // guarded by mu_
    size_t answered_ = 0;                // guarded by mu_
  };

  // Steps name keys by index: 0 .. kKeys - 1.
  static constexpr size_t kKeys = 3;
  std::vector<std::string> keys_;
  ManualClock clock_;
  MemoryStore memory_{MemoryStoreOptions{.clock = &clock_}};
  std::unique_ptr<RedisStore> redis_;
  int traces_ = 0;
  int booked_ = 0;  // decisions that booked a future slot
};

class Conformance : public ConformanceTest, public ::testing::WithParamInterface<Algorithm> {};

TEST_P(Conformance, EdgeCases) {
  for (const Limit& limit : LimitsOf(GetParam())) {
    const int64_t period = limit.period().count();
    const int64_t cap = limit.capacity();
    // Start exactly on a window boundary, so the steps below land on known offsets.
    const int64_t now = clock_.now().time_since_epoch().count();
    clock_.Advance(Duration(period - now % period));
    const Duration p(period);
    const Duration last_us = p - 1us;
    RunTrace(limit,
             {
                 {0us, 0, 0},      // peek at a fresh key
                 {0us, 0, cap},    // the whole capacity at once
                 {0us, 0, 1},      // denied
                 {0us, 0, 0},      // peek while empty
                 {last_us, 0, 1},  // last microsecond of the window
                 {1us, 0, 1},      // first of the next
                 {1us, 0, cap},    // capacity again
                 {3 * p, 0, 1},    // a jump over several periods
                 {0us, 0, cap},    // capacity, possibly denied
                 {p / 2, 0, 1},    // half a window on
                 {p / 2, 0, 0},    // peek on the boundary
                 {10 * p, 0, 0},   // peek at a state long stale
                 {0us, 1, cap},    // another key
                 {0us, 0, 1},      // the first key, unaffected
                 {p - 1us, 1, 1},  // just before the period ends
                 {1us, 1, cap},    // when it ends
             },
             "edge cases");
    // Simultaneous requests one unit at a time, then the refill unit by unit.
    std::vector<Step> burst;
    for (int64_t i = 0; i < std::min<int64_t>(cap + 3, 60); ++i) burst.push_back({0us, 2, 1});
    for (int i = 0; i < 40; ++i) burst.push_back({limit.emission_interval() / 2, 2, 1});
    RunTrace(limit, burst, "burst then refill");
  }
}

TEST_P(Conformance, RandomTraces) {
  for (const Limit& limit : LimitsOf(GetParam())) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      std::mt19937_64 rng(seed * 7919 + static_cast<uint32_t>(limit.count()));
      std::vector<Step> trace;
      for (int i = 0; i < 300; ++i) trace.push_back(RandomStep(rng, limit));
      RunTrace(limit, trace, "seed " + std::to_string(seed));
      if (HasFatalFailure()) return;
    }
  }
}

// Checks in flight together, coalesced into shared script calls, decide as the same checks one
// after another: bursts of up to 64 random steps are sent at once on one connection per node,
// the clock moving between them, and now and then a check of another algorithm on a key of its
// own, which a call of the trace's algorithm cannot take in.
TEST_P(Conformance, CoalescedBurstsDecideAsOneAfterAnother) {
  auto store = MakeStore({.connections_per_thread = 1, .clock = &clock_, .expiry_margin = 10min});
  ASSERT_NE(store, nullptr);
  const Result<Limit> other = Limit::Create(
      GetParam() == Algorithm::kFixedWindow ? Algorithm::kGcra : Algorithm::kFixedWindow, 5, 1s);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const std::string other_key = "other";
  // A call that meets NOSCRIPT is sent again behind those queued since (connection.cc): its
  // scripts are loaded first, so that every burst keeps its order.
  const std::vector<Limit> limits = LimitsOf(GetParam());
  for (const Limit* limit : {&limits.front(), &*other}) {
    const Result<Decision> peek = store->Check({.scope = "load", .limit = limit, .key = "k"});
    ASSERT_TRUE(peek.ok()) << peek.status().ToString();
  }
  const int64_t calls_before = CallsOnEveryNode(*target_, "evalsha");
  int64_t checks = 0;
  for (const Limit& limit : limits) {
    std::mt19937_64 rng(static_cast<uint64_t>(limit.count()) * 31 + 5);
    const std::string scope = "c" + std::to_string(traces_++);
    for (int burst = 0; burst < 6; ++burst) {
      const size_t n = 1 + rng() % 64;
      Burst checks_at_once(*store, memory_);
      for (size_t i = 0; i < n; ++i) {
        Step step = RandomStep(rng, limit);
        const bool by_other = rng() % 16 == 0;
        const Limit& used = by_other ? *other : limit;
        const std::string& key = by_other ? other_key : keys_[step.key];
        clock_.Advance(step.advance);
        checks_at_once.Send(
            {.scope = scope, .limit = &used, .key = key, .cost = by_other ? 1 : step.cost},
            "t=" + std::to_string(clock_.now().time_since_epoch().count()) + " key=" + key +
                " cost=" + std::to_string(step.cost) + " " +
                std::string(AlgorithmName(used.algorithm())));
      }
      checks_at_once.ExpectAsMemory("count=" + std::to_string(limit.count()) +
                                    " period=" + std::to_string(limit.period().count()) +
                                    "us, burst " + std::to_string(burst));
      if (HasFatalFailure()) return;
      checks += static_cast<int64_t>(n);
    }
  }
  const int64_t calls = CallsOnEveryNode(*target_, "evalsha") - calls_before;
  std::printf("%lld checks in %lld script calls\n", static_cast<long long>(checks),
              static_cast<long long>(calls));
  EXPECT_LT(calls, checks);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Conformance, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// Reservations: the meters book future slots (max_delay) identically in both stores, including
// states booked far past their capacity, refusals beyond max_delay and TTLs of booked keys.
class ReservationConformance : public ConformanceTest,
                               public ::testing::WithParamInterface<Algorithm> {};

TEST_P(ReservationConformance, BookedQueuesAndRandomTraces) {
  for (const Limit& limit : LimitsOf(GetParam())) {
    const Duration interval = limit.emission_interval();
    const Duration most = std::min<Duration>(MaxDelayOf(limit), 3 * limit.period());
    // A whole queue at one instant, refusals past it, then the queue draining as slots come.
    std::vector<Step> queue;
    for (int i = 0; i < 60; ++i) queue.push_back({0us, 0, 1, most});
    queue.push_back({0us, 0, limit.capacity(), most});
    queue.push_back({0us, 0, 0, most});  // a peek never books
    queue.push_back({0us, 0, 1, 0us});   // a plain check waits behind the queue
    for (int i = 0; i < 20; ++i) queue.push_back({interval, 0, 1, interval});
    queue.push_back({most, 0, 1, most});
    RunTrace(limit, queue, "booked queue");
    if (HasFatalFailure()) return;

    for (uint32_t seed = 1; seed <= 3; ++seed) {
      std::mt19937_64 rng(seed * 104'729 + static_cast<uint32_t>(limit.count()));
      std::vector<Step> trace;
      for (int i = 0; i < 300; ++i) {
        Step step{Duration(rng() % 3 == 0 ? 0 : 1 + rng() % (2 * interval.count())),
                  static_cast<int>(rng() % kKeys), rng() % 10 == 0 ? 0 : 1};
        if (rng() % 10 == 0) step.cost = 1 + static_cast<int64_t>(rng() % limit.capacity());
        const uint64_t dice = rng() % 4;
        if (dice == 1) step.max_delay = Duration(rng() % (interval.count() + 1));
        if (dice >= 2) step.max_delay = Duration(rng() % (most.count() + 1));
        trace.push_back(step);
      }
      RunTrace(limit, trace, "reservations, seed " + std::to_string(seed));
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(booked_, 500);
}

INSTANTIATE_TEST_SUITE_P(Meters, ReservationConformance,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                           Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// Give-backs (Store::GiveBack): random checks, reservations and give-backs of the meters decide
// alike on both stores, and after each give-back the key lives exactly as long as a check's
// script would have it live (its state's reset_after rounded up to ms, plus the margin), or is
// gone when the state is fresh again.
class GiveBackConformance : public ConformanceTest,
                            public ::testing::WithParamInterface<Algorithm> {
 protected:
  // The Redis key of `key`'s state under `scope`, and a client of the node holding it.
  struct StateKey {
    std::string name;
    std::unique_ptr<redis::Client> node;
  };

  // Gives `units` back on both stores, and checks the key's expiry against the state MemoryStore
  // holds then (seen by a peek, which changes nothing).
  void GiveBack(const std::string& scope, const Limit& limit, int key, int64_t units,
                StateKey& state_key, const std::string& where) {
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_TRUE(memory_.GiveBack(scope, limit, keys_[key], units).ok()) << where;
    const Status got = redis_->GiveBack(scope, limit, keys_[key], units);
    ASSERT_TRUE(got.ok()) << where << ": " << got.ToString();
    const Result<Decision> peek =
        memory_.Check({.scope = scope, .limit = &limit, .key = keys_[key], .cost = 0});
    ASSERT_TRUE(peek.ok());
    const int64_t pttl = Ask(*state_key.node, "PTTL", state_key.name).integer;
    const int64_t reset_after = peek->reset_after.count();
    if (reset_after == 0) {
      EXPECT_EQ(pttl, -2) << where << ": a fresh state's key is left";
      return;
    }
    ++written_;
    const int64_t ttl = (reset_after + 999) / 1000 + 10 * 60 * 1000;  // the margin: 10 min
    const auto passed = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - sent)
                            .count();
    EXPECT_LE(pttl, ttl) << where;
    EXPECT_GE(pttl, ttl - passed - 1) << where;
  }

  // `command` on one key, answered (a failure of the test otherwise).
  static redis::Reply Ask(redis::Client& node, std::string_view command, std::string_view key) {
    const std::string_view argv[] = {command, key};
    Result<redis::Reply> reply = node.CommandSync(argv);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? std::move(*reply) : redis::Reply{};
  }

  int written_ = 0;  // give-backs that left a state with its TTL
};

TEST_P(GiveBackConformance, RandomChecksReservationsAndGiveBacks) {
  int given_back = 0;
  for (const Limit& limit : LimitsOf(GetParam())) {
    const Duration interval = limit.emission_interval();
    const Duration most = std::min<Duration>(MaxDelayOf(limit), 3 * limit.period());
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      const std::string scope = "g" + std::to_string(traces_++);
      std::vector<StateKey> state_keys;
      for (const std::string& key : keys_) {
        state_keys.push_back({redis_->KeysOf(scope, key)[0], Inspector(target_->node_of(key))});
        ASSERT_NE(state_keys.back().node, nullptr);
      }
      std::mt19937_64 rng(seed * 7'919 + static_cast<uint32_t>(limit.count()));
      for (int i = 0; i < 200; ++i) {
        clock_.Advance(Duration(rng() % 3 == 0 ? 0 : 1 + rng() % (2 * interval.count())));
        const int key = static_cast<int>(rng() % kKeys);
        const std::string where = std::string(AlgorithmName(limit.algorithm())) +
                                  " capacity=" + std::to_string(limit.capacity()) + " seed " +
                                  std::to_string(seed) + " step " + std::to_string(i);
        if (rng() % 3 == 0) {
          GiveBack(scope, limit, key, 1 + static_cast<int64_t>(rng() % limit.capacity()),
                   state_keys[key], where);
          if (HasFatalFailure()) return;
          ++given_back;
          continue;
        }
        const CheckRequest request{
            .scope = scope,
            .limit = &limit,
            .key = keys_[key],
            .cost = rng() % 10 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % limit.capacity()),
            .max_delay = rng() % 2 == 0 ? Duration(rng() % (most.count() + 1)) : 0us};
        const Result<Decision> expected = memory_.Check(request);
        const Result<Decision> got = redis_->Check(request);
        ASSERT_TRUE(expected.ok() && got.ok() && *expected == *got)
            << where << " cost=" << request.cost << " max_delay=" << request.max_delay.count()
            << "\n  memory: " << DescribeDecision(expected)
            << "\n  redis:  " << DescribeDecision(got);
        if (expected->delay.count() > 0) ++booked_;
      }
      // A state on every key, for the check that the keys landed on every node.
      for (const std::string& key : keys_) {
        ASSERT_TRUE(redis_->Check({.scope = scope, .limit = &limit, .key = key}).ok());
      }
    }
  }
  EXPECT_GT(given_back, 1000);
  EXPECT_GT(written_, 300);
  EXPECT_GT(booked_, 200);
}

// What a give-back leaves alone on Redis: a key with no state, and a key holding another
// algorithm's state, whatever its type (sliding_log's is a sorted set).
TEST_P(GiveBackConformance, LeavesAbsentKeysAndOtherAlgorithmsStatesAsTheyAre) {
  const Limit meter = *Limit::Create(GetParam(), 5, 10s);
  ASSERT_TRUE(redis_->GiveBack("absent", meter, keys_[0], 1).ok());
  auto absent_node = Inspector(target_->node_of(keys_[0]));
  ASSERT_NE(absent_node, nullptr);
  EXPECT_EQ(Ask(*absent_node, "EXISTS", redis_->KeysOf("absent", keys_[0])[0]).integer, 0);
  size_t next = 0;  // the keys in turn: one on every node
  for (Algorithm other : kAllAlgorithms) {
    if (other == GetParam()) continue;
    const std::string& key = keys_[next++ % kKeys];
    const Limit held = *Limit::Create(other, 5, 10s);
    const std::string scope = "other-" + std::string(AlgorithmName(other));
    const CheckRequest check{.scope = scope, .limit = &held, .key = key, .cost = 5};
    ASSERT_TRUE(redis_->Check(check)->allowed);
    auto node = Inspector(target_->node_of(key));
    ASSERT_NE(node, nullptr);
    const std::string name = redis_->KeysOf(scope, key)[0];
    const std::string before = Ask(*node, "DUMP", name).str;
    ASSERT_TRUE(redis_->GiveBack(scope, meter, key, 5).ok()) << AlgorithmName(other);
    EXPECT_EQ(Ask(*node, "DUMP", name).str, before) << AlgorithmName(other);
    EXPECT_FALSE(redis_->Check(check)->allowed) << AlgorithmName(other);
  }
}

INSTANTIATE_TEST_SUITE_P(Meters, GiveBackConformance,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                           Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// The clock steps back (a failover to a host whose clock is behind): both stores treat a state
// stamped later than now as current. The whole capacity spent just after a window boundary is
// not granted again when the clock steps back across the boundary, nor by a whole period, nor
// when it comes back.
TEST_P(Conformance, ClockSteppingBackGrantsNothingAgain) {
  int key = 0;
  for (const Limit& limit : LimitsOf(GetParam())) {
    key = (key + 1) % kKeys;
    const int64_t period = limit.period().count();
    const int64_t now = clock_.now().time_since_epoch().count();
    clock_.Advance(Duration(period - now % period));  // on a boundary
    const Duration p(period), into = p / 10;
    std::vector<Decision> decisions;
    RunTrace(limit,
             {
                 {into, key, limit.capacity()},  // spent just after the boundary
                 {-into - 1us, key, 1},          // back across the boundary
                 {-p, key, 1},                   // a whole period further back
                 {0us, key, 0},                  // a peek there
                 {p + into + 1us, key, 1},       // back where it was spent
             },
             "clock stepping back", &decisions);
    if (HasFatalFailure()) return;
    ASSERT_EQ(decisions.size(), 5u);
    EXPECT_TRUE(decisions[0].allowed);
    for (size_t i = 1; i < decisions.size(); ++i) {
      EXPECT_FALSE(decisions[i].allowed) << AlgorithmName(limit.algorithm()) << " count "
                                         << limit.count() << " period " << period << " step " << i;
      EXPECT_EQ(decisions[i].remaining, 0);
    }
  }
}

TEST_P(Conformance, RandomTracesWithTheClockSteppingBack) {
  for (const Limit& limit : LimitsOf(GetParam())) {
    std::mt19937_64 rng(static_cast<uint32_t>(limit.count()) * 131);
    const int64_t period = limit.period().count();
    std::vector<Step> trace;
    for (int i = 0; i < 300; ++i) {
      Step step{Duration(rng() % std::max<int64_t>(period / 4, 1)), static_cast<int>(rng() % kKeys),
                static_cast<int64_t>(rng() % (limit.capacity() + 1))};
      if (rng() % 8 == 0) step.advance = -Duration(rng() % (2 * period));
      if (rng() % 3 == 0) step.cost = 1;
      trace.push_back(step);
    }
    RunTrace(limit, trace, "clock stepping back");
    if (HasFatalFailure()) return;
  }
}

// A rule reloaded with other parameters: calls on one key come under different limits of the
// same algorithm (count, period, burst), and the meters book slots ahead under one limit and are
// then judged under another. Both stores read each state the same way.
class ParameterChangeConformance : public ConformanceTest,
                                   public ::testing::WithParamInterface<Algorithm> {};

TEST_P(ParameterChangeConformance, RandomChangesOnOneKey) {
  const std::vector<Limit> limits = LimitsOf(GetParam());
  size_t current = 0;
  int changes = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed * 65'537 + static_cast<uint32_t>(GetParam()));
    std::vector<Step> trace;
    for (int i = 0; i < 400; ++i) {
      if (rng() % 6 == 0) {
        current = rng() % limits.size();
        ++changes;
      }
      const Limit& limit = limits[current];
      Step step = RandomStep(rng, limit);
      step.limit = &limit;
      if (IsMeter(GetParam()) && rng() % 2 == 0) {
        const Duration most = std::min<Duration>(MaxDelayOf(limit), 3 * limit.period());
        step.max_delay = Duration(rng() % (most.count() + 1));
      }
      trace.push_back(step);
    }
    RunTrace(limits[0], trace, "changing parameters, seed " + std::to_string(seed));
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(changes, 200);
  if (IsMeter(GetParam())) {
    EXPECT_GT(booked_, 30);  // slots booked under one limit, then judged under others
  }
}

// The burst of a meter lowered from 1000 to 10 after one unit was spent: neither store admits
// more than 10 at once, nor reports more remaining.
TEST_F(ConformanceTest, ALoweredBurstIsTheMostAdmittedAtOnce) {
  const Algorithm meters[] = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra};
  static_assert(std::size(meters) == kKeys, "one key each, on every node");
  for (int key = 0; key < static_cast<int>(kKeys); ++key) {
    const Algorithm a = meters[key];
    const Limit wide = *Limit::Create(a, 1000, 1h, 1000);
    const Limit narrow = *Limit::Create(a, 1000, 1h, 10);
    std::vector<Step> trace = {{0us, key, 1}};
    for (int i = 0; i < 30; ++i) trace.push_back({0us, key, 1, 0us, &narrow});
    std::vector<Decision> decisions;
    RunTrace(wide, trace, "burst lowered", &decisions);
    if (HasFatalFailure()) return;
    int admitted = 0;
    for (size_t i = 1; i < decisions.size(); ++i) {
      admitted += decisions[i].allowed;
      EXPECT_LE(decisions[i].remaining, 10) << AlgorithmName(a) << " step " << i;
    }
    EXPECT_LE(admitted, 10) << AlgorithmName(a);
    EXPECT_GE(admitted, 9) << AlgorithmName(a);
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, ParameterChangeConformance,
                         ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// A scope whose limit changes algorithm: the other algorithm's state is replaced by a fresh one,
// in Redis as in memory (which holds one state per key).
TEST_F(ConformanceTest, ChangingAlgorithmStartsFresh) {
  std::vector<Limit> limits;
  for (Algorithm a : kAllAlgorithms) limits.push_back(*Limit::Create(a, 4, 1s));
  std::mt19937_64 rng(42);
  for (int i = 0; i < 400; ++i) {
    const Limit& limit = limits[rng() % limits.size()];
    clock_.Advance(Duration(rng() % 200'000));
    const int64_t cost = static_cast<int64_t>(rng() % 3);
    const CheckRequest request{
        .scope = "changing", .limit = &limit, .key = keys_[rng() % kKeys], .cost = cost};
    const Result<Decision> expected = memory_.Check(request);
    const Result<Decision> got = redis_->Check(request);
    ASSERT_TRUE(expected.ok() && got.ok() && *expected == *got)
        << "step " << i << " " << AlgorithmName(limit.algorithm()) << " cost " << cost
        << "\n  memory: " << DescribeDecision(expected) << "\n  redis:  " << DescribeDecision(got);
  }
}

// The same with checks coalesced into shared calls: runs of checks of one algorithm on keys that
// hold another's state (a sliding log's sorted set among them, which the shared call's MGET reads
// as no state) decide as one after another, and leave no state behind that a later run would see.
TEST_F(ConformanceTest, CoalescedChecksOnKeysChangingAlgorithmStartFresh) {
  auto store = MakeStore({.connections_per_thread = 1, .clock = &clock_, .expiry_margin = 10min});
  ASSERT_NE(store, nullptr);
  std::vector<Limit> limits;
  for (Algorithm a : kAllAlgorithms) limits.push_back(*Limit::Create(a, 4, 1s));
  // Every script loaded first: a call re-sent after NOSCRIPT goes behind those queued since.
  for (const Limit& limit : limits) {
    const Result<Decision> peek = store->Check({.scope = "load", .limit = &limit, .key = "k"});
    ASSERT_TRUE(peek.ok()) << peek.status().ToString();
  }
  std::mt19937_64 rng(11);
  for (int burst = 0; burst < 40; ++burst) {
    Burst checks_at_once(*store, memory_);
    while (checks_at_once.size() < 48) {
      const Limit& limit = limits[rng() % limits.size()];
      for (uint64_t run = 1 + rng() % 8; run > 0; --run) {
        clock_.Advance(Duration(rng() % 100'000));
        const int64_t cost = static_cast<int64_t>(rng() % 3);
        const std::string& key = keys_[rng() % kKeys];
        checks_at_once.Send({.scope = "changing", .limit = &limit, .key = key, .cost = cost},
                            std::string(AlgorithmName(limit.algorithm())) + " key=" + key +
                                " cost=" + std::to_string(cost));
      }
    }
    checks_at_once.ExpectAsMemory("burst " + std::to_string(burst));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace sluice::testing
