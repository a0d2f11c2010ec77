// Acquirer on a MemoryStore and ManualTimers: waiters are admitted at their slots (meters) or
// when their retry comes (windows), in arrival order, within max_wait; the bounds refuse at once;
// cancelling keeps what the header promises and nothing more.
#include "sluice/acquirer.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"
#include "support/failing_store.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr Algorithm kMeters[] = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                 Algorithm::kGcra};

Limit MakeLimit(Algorithm a, int64_t count, Duration period,
                std::optional<int64_t> burst = std::nullopt) {
  auto limit = Limit::Create(a, count, period, burst);
  EXPECT_TRUE(limit.ok()) << limit.status().ToString();
  return *limit;
}

// What each acquire ended with, and when (by the manual clock).
struct Ended {
  std::string name;
  Result<Acquisition> result;
  Duration at;
};

class AcquirerTest : public ::testing::Test {
 protected:
  void Use(const Limit& limit, AcquirerOptions options = {}) {
    acquirer_.reset();
    limiter_ = std::make_unique<Limiter>(store_, "acq", limit);
    acquirer_ = std::make_unique<Acquirer>(*limiter_, timers_, options);
  }

  AcquireId Start(const std::string& name, Duration max_wait, std::string_view key = "k",
                  int64_t cost = 1) {
    return acquirer_->AcquireAsync(key, cost, max_wait, [this, name](Result<Acquisition> r) {
      ended_.push_back({name, std::move(r), clock_.now() - start_});
    });
  }

  const Ended* Find(const std::string& name) const {
    for (const auto& e : ended_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  AcquireOutcome OutcomeOf(const std::string& name) const {
    const Ended* e = Find(name);
    EXPECT_NE(e, nullptr) << name << " has not ended";
    EXPECT_TRUE(e == nullptr || e->result.ok()) << name;
    return e && e->result.ok() ? e->result->outcome : AcquireOutcome::kDenied;
  }
  std::vector<std::string> Order() const {
    std::vector<std::string> names;
    for (const auto& e : ended_) names.push_back(e.name);
    return names;
  }

  ManualClock clock_;
  const Time start_ = clock_.now();
  ManualTimers timers_{clock_};
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
  std::unique_ptr<Limiter> limiter_;
  std::vector<Ended> ended_;
  std::unique_ptr<Acquirer> acquirer_;  // last: destroyed first
};

TEST_F(AcquirerTest, MetersAdmitWaitersAtTheirBookedSlotsInArrivalOrder) {
  for (Algorithm a : kMeters) {
    ended_.clear();
    Use(MakeLimit(a, 10, 1s, 1));  // one every 100 ms, no burst beyond one
    const std::string scope(AlgorithmName(a));
    for (int i = 0; i < 5; ++i) Start(scope + std::to_string(i), 1s, scope);
    // The first is admitted at once; the others have booked 100 ms apart.
    ASSERT_EQ(ended_.size(), 1u) << scope;
    EXPECT_EQ(OutcomeOf(scope + "0"), AcquireOutcome::kAdmitted);
    EXPECT_EQ(acquirer_->stats().in_progress, 4u);
    const Duration t0 = clock_.now() - start_;
    timers_.Advance(1s);
    ASSERT_EQ(ended_.size(), 5u) << scope;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(ended_[i].name, scope + std::to_string(i));
      ASSERT_TRUE(ended_[i].result.ok());
      EXPECT_EQ(ended_[i].result->outcome, AcquireOutcome::kAdmitted);
      EXPECT_EQ(ended_[i].at - t0, i * 100ms) << scope << " " << i;
      EXPECT_EQ(ended_[i].result->waited, i * 100ms);
      EXPECT_EQ(ended_[i].result->decision.delay, i * 100ms);
    }
    EXPECT_EQ(acquirer_->stats().admitted, 5u);
    EXPECT_EQ(timers_.pending(), 0u);
  }
}

// A slot further than max_wait cannot come closer by waiting: refused at once, consuming nothing.
TEST_F(AcquirerTest, MeterSlotBeyondMaxWaitIsDeniedAtOnceAndConsumesNothing) {
  Use(MakeLimit(Algorithm::kGcra, 10, 1s, 1));
  Start("first", 0s);
  Start("second", 1s);  // books +100 ms
  Start("impatient", 150ms);
  ASSERT_EQ(ended_.size(), 2u);
  EXPECT_EQ(OutcomeOf("impatient"), AcquireOutcome::kDenied);
  EXPECT_EQ(Find("impatient")->result->waited, 0us);
  // Its slot would be +200 ms: booked 50 ms from now with the same max_wait.
  EXPECT_EQ(Find("impatient")->result->decision.retry_after, 50ms);
  Start("third", 1s);  // gets the slot the impatient one did not take
  timers_.Advance(1s);
  EXPECT_EQ(Find("third")->at, 200ms);
}

TEST_F(AcquirerTest, WindowAlgorithmsRetryWhenTheWindowAllowsInArrivalOrder) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingLog}) {
    ended_.clear();
    // Start on a window boundary so the next one is exactly a period away.
    clock_.Advance(1s - Duration(clock_.now().time_since_epoch().count() % 1'000'000));
    const Duration t0 = clock_.now() - start_;
    Use(MakeLimit(a, 2, 1s));
    const std::string key(AlgorithmName(a));
    for (int i = 0; i < 5; ++i) Start(key + std::to_string(i), 3s, key);
    ASSERT_EQ(Order(), (std::vector<std::string>{key + "0", key + "1"}));
    timers_.Advance(999ms);
    EXPECT_EQ(ended_.size(), 2u);  // none early
    timers_.Advance(1ms);
    ASSERT_EQ(Order(), (std::vector<std::string>{key + "0", key + "1", key + "2", key + "3"}));
    EXPECT_EQ(ended_[2].at - t0, 1s);
    EXPECT_EQ(ended_[3].at - t0, 1s);
    timers_.Advance(1s);
    ASSERT_EQ(ended_.size(), 5u);
    EXPECT_EQ(ended_[4].name, key + "4");
    EXPECT_EQ(ended_[4].at - t0, 2s);
    for (const auto& e : ended_) EXPECT_EQ(e.result->outcome, AcquireOutcome::kAdmitted);
    timers_.Advance(2s);  // let the window empty for the next algorithm
  }
}

// Behind a head that sleeps until the next window, a waiter whose max_wait ends first is denied
// at its deadline, not later; a head that cannot be admitted within max_wait is denied at once.
TEST_F(AcquirerTest, WindowWaitersNeverWaitBeyondMaxWait) {
  clock_.Advance(1s - Duration(clock_.now().time_since_epoch().count() % 1'000'000));
  const Duration t0 = clock_.now() - start_;
  Use(MakeLimit(Algorithm::kFixedWindow, 1, 1s));
  Start("admitted", 0s);
  Start("head", 2s);
  Start("short", 300ms);
  EXPECT_EQ(ended_.size(), 1u);
  timers_.Advance(300ms);
  ASSERT_EQ(ended_.size(), 2u);
  EXPECT_EQ(OutcomeOf("short"), AcquireOutcome::kDenied);
  EXPECT_EQ(Find("short")->at - t0, 300ms);
  EXPECT_EQ(Find("short")->result->decision.retry_after, 1s);  // the head's denial
  timers_.Advance(700ms);
  EXPECT_EQ(OutcomeOf("head"), AcquireOutcome::kAdmitted);
  EXPECT_EQ(Find("head")->at - t0, 1s);

  Start("head2", 2s);  // sleeps until the next window
  Start("no_wait", 0s);
  EXPECT_EQ(Find("no_wait"), nullptr);  // never inline from a timer
  timers_.Advance(0us);
  EXPECT_EQ(OutcomeOf("no_wait"), AcquireOutcome::kDenied);
  EXPECT_EQ(Find("no_wait")->result->waited, 0us);
  timers_.Advance(1s);
  EXPECT_EQ(OutcomeOf("head2"), AcquireOutcome::kAdmitted);

  Start("hopeless", 500ms);  // the next window is 1 s away
  EXPECT_EQ(OutcomeOf("hopeless"), AcquireOutcome::kDenied);
  EXPECT_EQ(Find("hopeless")->result->waited, 0us);
  EXPECT_EQ(acquirer_->stats().denied, 3u);
}

TEST_F(AcquirerTest, BeyondTheBoundsRefusalsAreImmediateCountedAndTouchNoStore) {
  Use(MakeLimit(Algorithm::kGcra, 10, 1s, 1), {.max_waiters_per_key = 3, .max_waiters = 5});
  Start("a0", 0s, "a");  // admitted at once: not in progress afterwards
  for (int i = 1; i <= 3; ++i) Start("a" + std::to_string(i), 10s, "a");
  EXPECT_EQ(acquirer_->stats().in_progress, 3u);
  Start("a-refused", 10s, "a");
  ASSERT_EQ(ended_.size(), 2u);  // refused inside the call
  EXPECT_EQ(OutcomeOf("a-refused"), AcquireOutcome::kQueueFull);
  EXPECT_EQ(Find("a-refused")->result->decision, Decision{});  // no store call was made
  // Another key has its own line, up to the overall bound.
  Start("b0", 0s, "b");
  Start("b1", 10s, "b");
  Start("b2", 10s, "b");
  Start("b-refused", 10s, "b");
  EXPECT_EQ(OutcomeOf("b-refused"), AcquireOutcome::kQueueFull);
  EXPECT_EQ(acquirer_->stats().queue_full, 2u);
  EXPECT_EQ(acquirer_->stats().in_progress, 5u);
  // The refused ones booked nothing: "a" holds a0 and the three booked slots, up to +400 ms.
  EXPECT_EQ(limiter_->Check("a", 0)->reset_after, 400ms);
  timers_.Advance(1s);
  EXPECT_EQ(Find("a3")->at, 300ms);
  EXPECT_EQ(acquirer_->stats().admitted, 7u);
}

TEST_F(AcquirerTest, CancellingABookedSlotKeepsItConsumed) {
  Use(MakeLimit(Algorithm::kGcra, 10, 1s, 1));
  Start("a", 1s);
  Start("b", 1s);                      // +100 ms
  const AcquireId c = Start("c", 1s);  // +200 ms
  Start("d", 1s);                      // +300 ms
  timers_.Advance(50ms);
  EXPECT_TRUE(acquirer_->Cancel(c));
  EXPECT_EQ(OutcomeOf("c"), AcquireOutcome::kCancelled);
  EXPECT_EQ(Find("c")->at, 50ms);
  EXPECT_FALSE(acquirer_->Cancel(c));  // already ended
  Start("e", 1s);
  timers_.Advance(1s);
  // d keeps its slot; c's slot is not handed to e, which books after d.
  EXPECT_EQ(Find("d")->at, 300ms);
  EXPECT_EQ(Find("e")->at, 400ms);
  EXPECT_EQ(Order(), (std::vector<std::string>{"a", "c", "b", "d", "e"}));
  EXPECT_EQ(acquirer_->stats().cancelled, 1u);
}

TEST_F(AcquirerTest, CancellingAWaiterInLineConsumesNothing) {
  clock_.Advance(1s - Duration(clock_.now().time_since_epoch().count() % 1'000'000));
  const Duration t0 = clock_.now() - start_;
  Use(MakeLimit(Algorithm::kSlidingLog, 2, 1s));
  Start("a", 0s);
  Start("b", 0s);
  const AcquireId head = Start("head", 5s);  // sleeping until the window frees a unit
  const AcquireId in_line = Start("in_line", 5s);
  Start("last", 5s);
  EXPECT_TRUE(acquirer_->Cancel(in_line));
  EXPECT_EQ(OutcomeOf("in_line"), AcquireOutcome::kCancelled);
  EXPECT_EQ(Find("in_line")->result->decision, Decision{});  // it never checked
  timers_.Advance(1s);
  // The cancelled waiter took no unit: head and last get the two freed at +1 s.
  EXPECT_EQ(OutcomeOf("head"), AcquireOutcome::kAdmitted);
  EXPECT_EQ(OutcomeOf("last"), AcquireOutcome::kAdmitted);
  EXPECT_EQ(Find("last")->at - t0, 1s);
  EXPECT_FALSE(acquirer_->Cancel(head));
  EXPECT_FALSE(acquirer_->Cancel(12345));
}

// Cancelling the head that sleeps before its retry lets the next one check at once.
TEST_F(AcquirerTest, CancellingASleepingHeadPassesTheTurn) {
  Use(MakeLimit(Algorithm::kFixedWindow, 1, 1s));
  Start("a", 0s);
  const AcquireId head = Start("head", 5s);
  Start("next", 5s);
  EXPECT_EQ(timers_.pending(), 2u);  // head's retry, next's deadline
  EXPECT_TRUE(acquirer_->Cancel(head));
  EXPECT_EQ(OutcomeOf("head"), AcquireOutcome::kCancelled);
  EXPECT_EQ(Find("head")->result->decision.allowed, false);  // its last check
  EXPECT_EQ(timers_.pending(), 1u);                          // next now sleeps as the head
  timers_.Advance(1s);
  EXPECT_EQ(OutcomeOf("next"), AcquireOutcome::kAdmitted);
}

TEST_F(AcquirerTest, DestroyingTheAcquirerCancelsEveryWaiter) {
  Use(MakeLimit(Algorithm::kLeakyBucket, 10, 1s, 1));
  for (int i = 0; i < 4; ++i) Start("w" + std::to_string(i), 1s);
  acquirer_.reset();
  ASSERT_EQ(ended_.size(), 4u);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(ended_[i].result->outcome, AcquireOutcome::kCancelled);
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST_F(AcquirerTest, CancelAllEndsEveryWaiterAndKeepsServing) {
  Use(MakeLimit(Algorithm::kFixedWindow, 1, 1s));
  Start("admitted", 0s);
  Start("head", 5s);
  Start("in_line", 5s);
  acquirer_->CancelAll();
  EXPECT_EQ(OutcomeOf("head"), AcquireOutcome::kCancelled);
  EXPECT_EQ(OutcomeOf("in_line"), AcquireOutcome::kCancelled);
  EXPECT_EQ(acquirer_->stats().in_progress, 0u);
  EXPECT_EQ(timers_.pending(), 0u);
  Start("after", 5s);
  timers_.Advance(1s);
  EXPECT_EQ(OutcomeOf("after"), AcquireOutcome::kAdmitted);
}

TEST_F(AcquirerTest, BadInputAndStoreErrorsAreErrors) {
  Use(MakeLimit(Algorithm::kGcra, 10, 1s, 2));
  Start("negative", -1ms);
  Start("too_costly", 1s, "k", 3);
  Start("no_key", 1s, "");
  EXPECT_EQ(Find("negative")->result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Find("too_costly")->result.status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_EQ(Find("no_key")->result.status().code(), StatusCode::kInvalidArgument);

  testing::FailingStore full;
  full.error = Status::ResourceExhausted("memory store is full");
  Limiter limiter(full, "full", MakeLimit(Algorithm::kGcra, 10, 1s, 1));
  Acquirer acquirer(limiter, timers_);
  EXPECT_EQ(acquirer.Acquire("two", 1, 0s).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(acquirer.stats().errors, 1u);
}

// On a real io_context: the synchronous form blocks until the slot, and never returns early.
TEST(AcquirerOnAsio, SynchronousAcquireReturnsAtTheSlot) {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread runner([&io] { io.run(); });
  {
    AsioTimers timers(io);
    MemoryStore store;
    Limiter limiter(store, "asio", MakeLimit(Algorithm::kGcra, 50, 1s, 1));  // 20 ms apart
    Acquirer acquirer(limiter, timers);
    for (int i = 0; i < 3; ++i) {
      const auto before = std::chrono::steady_clock::now();
      auto result = acquirer.Acquire("k", 1, 1s);
      const auto took = std::chrono::steady_clock::now() - before;
      ASSERT_TRUE(result.ok());
      ASSERT_EQ(result->outcome, AcquireOutcome::kAdmitted);
      EXPECT_GE(took, result->decision.delay);
      EXPECT_LT(took, 1s);
    }
  }
  work.reset();
  runner.join();
}

}  // namespace
}  // namespace sluice
