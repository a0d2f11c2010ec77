// LeasingStore over a MemoryStore on a manual clock: what is decided from leases, what goes to
// the backend, and that leases never admit more than the limit.
#include "sluice/leasing_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/timers.h"
#include "support/failing_store.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The backend's calls, counted on the way to a real MemoryStore; with `hold` set, checks wait
// until Release, as a remote store's do while in flight; with `hold_answers`, they are decided
// at once and their answers wait until Release, as a remote store's do on their way back.
class CountingStore final : public Store {
 public:
  explicit CountingStore(Store& inner) : inner_(inner) {}

  int checks = 0;
  int give_backs = 0;
  bool hold = false;
  bool hold_answers = false;

  void Release() {
    auto held = std::move(held_);
    held_.clear();
    for (auto& call : held) call();
  }
  size_t held() const { return held_.size(); }

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    checks += static_cast<int>(requests.size());
    if (hold_answers) {
      return inner_.CheckBatchAsync(requests, [this, done = std::move(done)](auto answers) {
        held_.push_back(
            [done, answers = std::move(answers)]() mutable { done(std::move(answers)); });
      });
    }
    if (!hold) return inner_.CheckBatchAsync(requests, std::move(done));
    // What a request points to lives until its answer: the held call may use it.
    std::vector<CheckRequest> copy(requests.begin(), requests.end());
    held_.push_back([this, copy, done = std::move(done)]() mutable {
      inner_.CheckBatchAsync(copy, std::move(done));
    });
  }
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override {
    inner_.CheckAllAsync(requests, std::move(done));
  }
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override {
    inner_.ResetAsync(scope, key, std::move(done));
  }
  void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by, StatusCallback done) override {
    ++give_backs;
    inner_.GiveBackAsync(scope, limit, key, units, std::move(done), apply_by);
  }

 private:
  Store& inner_;
  std::vector<std::function<void()>> held_;
};

class LeasingStoreTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  ManualTimers timers_{clock_};
  MemoryStore memory_{MemoryStoreOptions{.clock = &clock_}};
  CountingStore backend_{memory_};
  std::optional<LeasingStore> store_{std::in_place, backend_, timers_};

  static Limit Make(Algorithm algorithm, int64_t count, Duration period,
                    std::optional<int64_t> burst = std::nullopt) {
    return Limit::Create(algorithm, count, period, burst).value();
  }
  Result<Decision> Check(const Limit& limit, LeaseTerms terms, int64_t cost = 1,
                         std::string_view key = "k") {
    return store_->Check(
        {.scope = "api", .limit = &limit, .key = key, .cost = cost, .lease = terms});
  }
  // What the backend itself says of the key now, without consuming.
  int64_t BackendRemaining(const Limit& limit, std::string_view key = "k") {
    return memory_.Check({.scope = "api", .limit = &limit, .key = key, .cost = 0})->remaining;
  }
};

TEST_F(LeasingStoreTest, ALeaseDecidesItsUnitsWithoutTheBackend) {
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(1)};
  for (int i = 0; i < 10; ++i) {
    auto d = Check(limit, terms);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->allowed);
    EXPECT_EQ(d->remaining, 9 - i) << "what the lease has left";
  }
  EXPECT_EQ(backend_.checks, 1);
  EXPECT_EQ(BackendRemaining(limit), 90) << "the lease was consumed in the backend first";
  EXPECT_TRUE(Check(limit, terms)->allowed);
  EXPECT_EQ(backend_.checks, 2);
  const LeaseStats stats = store_->lease_stats();
  EXPECT_EQ(stats.taken, 2u);
  EXPECT_EQ(stats.units_taken, 20u);
  EXPECT_EQ(stats.units_used, 11u);
}

TEST_F(LeasingStoreTest, ChecksALeaseCannotServeGoToTheBackend) {
  const Limit limit = Make(Algorithm::kTokenBucket, 100, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(1)};
  EXPECT_TRUE(Check(limit, {}, 1)->allowed);      // no terms
  EXPECT_TRUE(Check(limit, terms, 0)->allowed);   // a peek
  EXPECT_TRUE(Check(limit, terms, 11)->allowed);  // more than a lease
  auto booked = store_->Check({.scope = "api",
                               .limit = &limit,
                               .key = "k",
                               .cost = 1,
                               .max_delay = seconds(1),
                               .lease = terms});
  EXPECT_TRUE(booked->allowed);
  EXPECT_EQ(backend_.checks, 4);
  EXPECT_EQ(store_->lease_stats().taken, 0u);
  EXPECT_EQ(BackendRemaining(limit), 100 - 1 - 11 - 1);
}

TEST_F(LeasingStoreTest, BadTermsAreRefusedAndChangeNothing) {
  const Limit window = Make(Algorithm::kSlidingWindow, 100, seconds(1));
  auto d = Check(window, {.units = 10, .lifetime = seconds(1)});
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  const Limit gcra = Make(Algorithm::kGcra, 100, seconds(1));
  EXPECT_EQ(Check(gcra, {.units = 101, .lifetime = seconds(1)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(gcra, {.units = 10, .lifetime = Duration(0)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(gcra, {.units = 10, .lifetime = kMaxLeaseLifetime + Duration(1)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.checks, 0);
}

TEST_F(LeasingStoreTest, AFixedWindowTakesWhatItsWindowHasLeftThenRefusesUntilItEnds) {
  const Limit limit = Make(Algorithm::kFixedWindow, 25, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(10)};
  clock_.Set(Time(seconds(1'700'000'000)));  // a window's start
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(Check(limit, terms)->allowed) << i;
  // Two whole leases, a whole one refused, then the 5 left.
  EXPECT_EQ(backend_.checks, 4);
  timers_.Advance(milliseconds(400));
  auto refused = Check(limit, terms);
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->retry_after, milliseconds(600)) << "the window's end";
  const int calls = backend_.checks;
  timers_.Advance(milliseconds(100));
  auto again = Check(limit, terms);
  EXPECT_FALSE(again->allowed);
  EXPECT_EQ(again->retry_after, milliseconds(500));
  EXPECT_EQ(backend_.checks, calls) << "refused here, with no call";
  timers_.Advance(milliseconds(500));
  EXPECT_TRUE(Check(limit, terms)->allowed) << "a new window";
  EXPECT_EQ(store_->lease_stats().refusals, 2u);
}

TEST_F(LeasingStoreTest, AFixedWindowLeaseEndsWithItsWindowAndItsRestLapses) {
  const Limit limit = Make(Algorithm::kFixedWindow, 100, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(10)};
  clock_.Set(Time(seconds(1'700'000'000) + milliseconds(900)));
  ASSERT_TRUE(Check(limit, terms)->allowed);
  timers_.Advance(milliseconds(100));  // the window ends: 9 unused units lapse
  EXPECT_EQ(store_->lease_stats().units_lapsed, 9u);
  EXPECT_EQ(store_->lease_stats().held, 0u);
  ASSERT_TRUE(Check(limit, terms)->allowed);
  EXPECT_EQ(backend_.checks, 2) << "the next window's check takes a new lease";
  EXPECT_EQ(BackendRemaining(limit), 90);
}

TEST_F(LeasingStoreTest, AMeterRefusesHereUntilAWholeLeaseIsThere) {
  // 10 per second: one unit every 100 ms; a burst of 20.
  const Limit limit = Make(Algorithm::kTokenBucket, 10, seconds(1), 20);
  const LeaseTerms terms{.units = 10, .lifetime = seconds(5)};
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Check(limit, terms)->allowed) << i;
  EXPECT_EQ(backend_.checks, 2);
  auto refused = Check(limit, terms);
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->retry_after, seconds(1)) << "until 10 units are there";
  timers_.Advance(milliseconds(500));
  auto still = Check(limit, terms);
  EXPECT_FALSE(still->allowed);
  EXPECT_EQ(still->retry_after, milliseconds(500));
  EXPECT_EQ(backend_.checks, 3);
  timers_.Advance(milliseconds(500));
  EXPECT_TRUE(Check(limit, terms)->allowed);
  EXPECT_EQ(backend_.checks, 4);
}

TEST_F(LeasingStoreTest, AMetersUnusedUnitsAreGivenBackWhenItsLeaseEnds) {
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(100));  // one unit a second
  const LeaseTerms terms{.units = 10, .lifetime = milliseconds(100)};
  ASSERT_TRUE(Check(limit, terms)->allowed);
  EXPECT_EQ(BackendRemaining(limit), 90);
  timers_.Advance(milliseconds(100));
  EXPECT_EQ(backend_.give_backs, 1);
  // 9 unused, less the one unit the meter's refill may have wasted in the lease's 100 ms and the
  // give-back's deadline of 50 ms.
  EXPECT_EQ(BackendRemaining(limit), 98);
  const LeaseStats stats = store_->lease_stats();
  EXPECT_EQ(stats.units_returned, 8u);
  EXPECT_EQ(stats.units_lapsed, 1u);
  EXPECT_EQ(stats.held, 0u);
}

// Without the lease, the meter would have been full for the lease's first 5 s and wasted their
// refill: giving the 4 unused units back would return that refill a second time.
TEST_F(LeasingStoreTest, AGiveBackNeverReturnsWhatTheRefillMayHaveWasted) {
  const Limit limit = Make(Algorithm::kGcra, 10, seconds(10));  // one unit a second, burst 10
  ASSERT_TRUE(Check(limit, {.units = 5, .lifetime = seconds(5)})->allowed);
  timers_.Advance(seconds(5) - milliseconds(1));
  ASSERT_TRUE(memory_.Check({.scope = "api", .limit = &limit, .key = "k", .cost = 8})->allowed);
  timers_.Advance(milliseconds(1));  // the lease ends
  // Had the one admitted unit been checked alone, 2 would remain now; never more with leases.
  EXPECT_LE(BackendRemaining(limit), 2);
  EXPECT_EQ(store_->lease_stats().units_returned, 0u);
  EXPECT_EQ(store_->lease_stats().units_lapsed, 4u);
}

TEST_F(LeasingStoreTest, ClosingTheStoreGivesBackWhatIsUnused) {
  const Limit limit = Make(Algorithm::kLeakyBucket, 100, seconds(100));
  ASSERT_TRUE(Check(limit, {.units = 10, .lifetime = seconds(10)}, 3)->allowed);
  store_.reset();
  EXPECT_EQ(BackendRemaining(limit), 96) << "7 unused, less a unit for the give-back's deadline";
}

TEST_F(LeasingStoreTest, ChecksWaitForATakeInFlightAsFarAsItsUnitsGo) {
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(1));
  const LeaseTerms terms{.units = 4, .lifetime = seconds(1)};
  backend_.hold = true;
  std::vector<Result<Decision>> answers;
  for (int i = 0; i < 6; ++i) {
    store_->CheckAsync({.scope = "api", .limit = &limit, .key = "k", .cost = 1, .lease = terms},
                       [&answers](Result<Decision> d) { answers.push_back(std::move(d)); });
  }
  EXPECT_EQ(backend_.checks, 3) << "one take for the first four, the other two on their own";
  EXPECT_TRUE(answers.empty());
  backend_.Release();
  ASSERT_EQ(answers.size(), 6u);
  for (const auto& d : answers) ASSERT_TRUE(d.ok() && d->allowed);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(answers[i]->remaining, 3 - i) << "the lease's, in order";
  EXPECT_EQ(answers[4]->remaining, 95);
  EXPECT_EQ(answers[5]->remaining, 94);
  EXPECT_EQ(store_->lease_stats().units_used, 4u);
}

TEST_F(LeasingStoreTest, ABackendErrorReachesEveryWaiter) {
  testing::FailingStore failing;
  LeasingStore store(failing, timers_);
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(1));
  auto d = store.Check({.scope = "api",
                        .limit = &limit,
                        .key = "k",
                        .cost = 1,
                        .lease = {.units = 10, .lifetime = seconds(1)}});
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.lease_stats().held, 0u) << "nothing is kept of a failed take";
}

TEST_F(LeasingStoreTest, NewTermsEndTheLeaseOfTheOldOnes) {
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(100));
  ASSERT_TRUE(Check(limit, {.units = 10, .lifetime = seconds(10)})->allowed);
  ASSERT_TRUE(Check(limit, {.units = 5, .lifetime = seconds(10)})->allowed);
  EXPECT_EQ(backend_.checks, 2);
  EXPECT_EQ(store_->lease_stats().units_returned, 8u);
  EXPECT_EQ(BackendRemaining(limit), 100 - 10 + 8 - 5);
}

TEST_F(LeasingStoreTest, ResetForgetsTheLease) {
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(100));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(10)};
  ASSERT_TRUE(Check(limit, terms)->allowed);
  ASSERT_TRUE(store_->Reset("api", "k").ok());
  EXPECT_EQ(store_->lease_stats().held, 0u);
  ASSERT_TRUE(Check(limit, terms)->allowed);
  EXPECT_EQ(backend_.checks, 2);
  EXPECT_EQ(BackendRemaining(limit), 90);
}

// A take decided before a reset and answered after it: its check is answered from it, and the
// rest of it lapses. Served, it would admit past the limit the reset started afresh.
TEST_F(LeasingStoreTest, AResetDuringATakeLeavesNothingOfItToServe) {
  const Limit limit = Make(Algorithm::kFixedWindow, 10, seconds(60));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(60)};
  clock_.Set(Time(seconds(1'700'000'040)));  // a window's start
  backend_.hold_answers = true;
  std::vector<Result<Decision>> answers;
  store_->CheckAsync({.scope = "api", .limit = &limit, .key = "k", .cost = 1, .lease = terms},
                     [&answers](Result<Decision> d) { answers.push_back(std::move(d)); });
  ASSERT_EQ(backend_.held(), 1u) << "the take is decided, its answer on its way";
  ASSERT_TRUE(store_->Reset("api", "k").ok());
  backend_.Release();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok() && answers[0]->allowed) << "decided by the store before the reset";
  backend_.hold_answers = false;
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += Check(limit, terms)->allowed;
  EXPECT_EQ(admitted, 10) << "the limit, from a lease taken after the reset";
  EXPECT_EQ(store_->lease_stats().units_lapsed, 9u);
}

// A whole lease refused while the store has enough for the check: the check waits for a second,
// smaller take, but no longer than the first take's deadline (store_timeout after it was sent).
// Past it, the check is answered DEADLINE_EXCEEDED, for its failure policy, and what the second
// take brings later serves the next checks.
TEST_F(LeasingStoreTest, TheSmallerTakeAnswersWithinTheFirstTakesDeadline) {
  const Limit limit = Make(Algorithm::kFixedWindow, 25, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(10)};
  clock_.Set(Time(seconds(1'700'000'000)));  // a window's start
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Check(limit, terms)->allowed) << i;
  backend_.hold = true;
  std::vector<Result<Decision>> answers;
  store_->CheckAsync({.scope = "api", .limit = &limit, .key = "k", .cost = 1, .lease = terms},
                     [&answers](Result<Decision> d) { answers.push_back(std::move(d)); });
  timers_.Advance(milliseconds(20));
  backend_.Release();  // the whole lease refused, 5 left: a take of those 5, held in turn
  ASSERT_EQ(backend_.held(), 1u);
  timers_.Advance(milliseconds(29));
  EXPECT_TRUE(answers.empty()) << "49 ms after the first take: still waiting";
  timers_.Advance(milliseconds(1));
  EXPECT_EQ(answers.size(), 1u) << "50 ms: the store's deadline";
  const StatusCode answered = answers.empty() ? StatusCode::kOk : answers[0].status().code();
  backend_.hold = false;
  backend_.Release();  // whatever came before: the store's destructor waits for the take
  EXPECT_EQ(answered, StatusCode::kDeadlineExceeded);
  EXPECT_EQ(answers.size(), 1u) << "answered once";
  const int calls = backend_.checks;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Check(limit, terms)->allowed) << "from the late take";
  EXPECT_EQ(backend_.checks, calls);
}

TEST_F(LeasingStoreTest, AFullTableSendsOtherKeysToTheBackend) {
  LeasingStore store(backend_, timers_, LeasingStoreOptions{.max_keys = 1});
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(1)};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        store.Check({.scope = "api", .limit = &limit, .key = "a", .lease = terms})->allowed);
    ASSERT_TRUE(
        store.Check({.scope = "api", .limit = &limit, .key = "b", .lease = terms})->allowed);
  }
  EXPECT_EQ(backend_.checks, 1 + 3);
  EXPECT_EQ(BackendRemaining(limit, "b"), 97);
}

TEST_F(LeasingStoreTest, ABatchMixesLeasedAndPlainChecksInItsOrder) {
  const Limit limit = Make(Algorithm::kGcra, 100, seconds(1));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(1)};
  std::vector<CheckRequest> batch = {
      {.scope = "api", .limit = &limit, .key = "a", .lease = terms},
      {.scope = "api", .limit = &limit, .key = "b"},
      {.scope = "api", .limit = &limit, .key = "a", .cost = -1, .lease = terms},
      {.scope = "api", .limit = &limit, .key = "a", .lease = terms},
  };
  auto results = store_->CheckBatch(batch);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0]->remaining, 9);
  EXPECT_EQ(results[1]->remaining, 99);
  EXPECT_EQ(results[2].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(results[3]->remaining, 8);
}

// Three processes' LeasingStores on one backend, checks at random times: whatever they admit, the
// limit admits no less. Every leased unit was consumed in the backend first, at or before the
// check it admits, so the checks admitted by any time t are at most what the limit allows up to
// t: a fixed window's count per window, a meter's burst plus a unit per emission interval.
class LeasesNeverOverAdmit : public ::testing::TestWithParam<Algorithm> {};

TEST_P(LeasesNeverOverAdmit, AcrossThreeProcesses) {
  const Algorithm algorithm = GetParam();
  const Limit limit = Limit::Create(algorithm, 50, milliseconds(100)).value();
  std::mt19937_64 random(20261204 + static_cast<int>(algorithm));
  for (int trial = 0; trial < 20; ++trial) {
    ManualClock clock(Time(seconds(1'700'000'000)));
    ManualTimers timers(clock);
    MemoryStore memory(MemoryStoreOptions{.clock = &clock});
    std::vector<std::unique_ptr<LeasingStore>> processes;
    for (int p = 0; p < 3; ++p) processes.push_back(std::make_unique<LeasingStore>(memory, timers));
    const LeaseTerms terms{.units = 1 + static_cast<int64_t>(random() % 20),
                           .lifetime = milliseconds(1 + random() % 200)};
    // From twice the limit's rate down to about it, where a lease is often left over at a
    // window's end.
    const int64_t max_step_us = 2'000 * (1 + trial % 4);
    const Time start = clock.now();
    std::map<int64_t, int64_t> admitted_per_window;
    int64_t admitted = 0;
    for (int step = 0; step < 2'000; ++step) {
      timers.Advance(Duration(static_cast<int64_t>(random() % max_step_us)));
      const int64_t cost = 1 + static_cast<int64_t>(random() % 3);
      auto d = processes[random() % 3]->Check(
          {.scope = "api", .limit = &limit, .key = "hot", .cost = cost, .lease = terms});
      ASSERT_TRUE(d.ok()) << d.status().message();
      if (!d->allowed) continue;
      admitted += cost;
      const Duration since_start = std::chrono::duration_cast<Duration>(clock.now() - start);
      if (algorithm == Algorithm::kFixedWindow) {
        const int64_t window = clock.now().time_since_epoch() / limit.period();
        ASSERT_LE(admitted_per_window[window] += cost, limit.count()) << "trial " << trial;
      } else {
        ASSERT_LE(admitted, limit.capacity() + since_start / limit.emission_interval())
            << "trial " << trial << " step " << step;
      }
    }
    EXPECT_GT(admitted, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Leasable, LeasesNeverOverAdmit,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kTokenBucket,
                                           Algorithm::kLeakyBucket, Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// Threads checking one key through one LeasingStore while another moves the clock: no race (for
// TSan), and no more admitted than the limit's bound. The clock may pass a lease's store_timeout
// while a check waits for the lease that another thread is getting (a thread held up on a loaded
// machine): that check is answered DEADLINE_EXCEEDED, as the lease table answers it, and nothing
// else may fail.
TEST(LeasingStoreConcurrency, ThreadsShareLeasesWithinTheLimit) {
  ManualClock clock(Time(seconds(1'700'000'000)));
  ManualTimers timers(clock);
  MemoryStore memory(MemoryStoreOptions{.clock = &clock});
  LeasingStore store(memory, timers);
  const Limit limit = Limit::Create(Algorithm::kGcra, 1'000, seconds(1)).value();
  const LeaseTerms terms{.units = 50, .lifetime = milliseconds(20)};
  std::atomic<int64_t> admitted{0};
  std::atomic<bool> stop{false};
  std::thread mover([&] {
    for (int i = 0; i < 2'000 && !stop.load(); ++i) timers.Advance(Duration(250));
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = t % 2 == 0 ? "hot" : "other";
      for (int i = 0; i < 5'000; ++i) {
        auto d = store.Check({.scope = "api", .limit = &limit, .key = key, .lease = terms});
        if (!d.ok()) {
          ASSERT_EQ(d.status().code(), StatusCode::kDeadlineExceeded) << d.status().message();
          continue;
        }
        if (d->allowed && key == "hot") admitted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  mover.join();
  // The clock moved at most 2000 × 250 us = 500 ms: a burst of 1000 and 500 more.
  EXPECT_LE(admitted.load(), 1'000 + 500);
  EXPECT_GT(admitted.load(), 0);
}

}  // namespace
}  // namespace sluice
