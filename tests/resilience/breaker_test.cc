// One failure domain's circuit breaker as a state machine, on a manual clock: it opens after
// consecutive outages, lets one probe through at a time once open_for has passed, closes on the
// probe's success only, and ignores the answers to calls let through before it last opened.
// DomainBreakers: a breaker per domain id, shared above kSlots, and what they report.
#include "resilience/breaker.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::resilience {
namespace {

using namespace std::chrono_literals;

class BreakerTest : public ::testing::Test {
 protected:
  // A call let through, answered with an outage.
  void FailOnce() {
    const BreakerPass pass = breaker_.Allow(clock_.now(), kDomain);
    ASSERT_TRUE(pass.allowed);
    breaker_.Failed(pass, clock_.now());
  }
  // Opens the breaker, from closed.
  void Open() {
    for (int i = 0; i < 3; ++i) FailOnce();
    ASSERT_EQ(breaker_.state(), BreakerState::kOpen);
  }

  static constexpr uint32_t kDomain = 7;
  ManualClock clock_;
  Breaker breaker_{BreakerOptions{.failures_to_open = 3, .open_for = 500ms}};
};

TEST_F(BreakerTest, StartsUnusedAndRecordsTheDomainOfItsFirstCall) {
  EXPECT_FALSE(breaker_.used());
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
  const BreakerPass pass = breaker_.Allow(clock_.now(), kDomain);
  EXPECT_TRUE(pass.allowed);
  EXPECT_FALSE(pass.probe);
  EXPECT_EQ(pass.domain, kDomain);
  EXPECT_TRUE(breaker_.used());
  EXPECT_EQ(breaker_.domain(), kDomain);
  (void)breaker_.Allow(clock_.now(), kDomain + 1);
  EXPECT_EQ(breaker_.domain(), kDomain);  // the first one's
}

TEST_F(BreakerTest, OpensAfterConsecutiveOutagesOnly) {
  FailOnce();
  FailOnce();
  breaker_.Succeeded(breaker_.Allow(clock_.now(), kDomain));  // the count starts again
  FailOnce();
  FailOnce();
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
  FailOnce();
  EXPECT_EQ(breaker_.state(), BreakerState::kOpen);
  EXPECT_EQ(breaker_.opens(), 1u);
  EXPECT_FALSE(breaker_.Allow(clock_.now(), kDomain).allowed);
}

TEST_F(BreakerTest, AnswersThatTellNothingOfTheBackendChangeNothing) {
  FailOnce();
  FailOnce();
  breaker_.Released(breaker_.Allow(clock_.now(), kDomain));  // e.g. a script's error
  FailOnce();
  EXPECT_EQ(breaker_.state(), BreakerState::kOpen);
}

TEST_F(BreakerTest, OneProbeAtATimeAfterOpenForAndItsSuccessCloses) {
  Open();
  clock_.Advance(499ms);
  EXPECT_FALSE(breaker_.Allow(clock_.now(), kDomain).allowed);
  clock_.Advance(1ms);
  const BreakerPass probe = breaker_.Allow(clock_.now(), kDomain);
  EXPECT_TRUE(probe.allowed);
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(breaker_.state(), BreakerState::kHalfOpen);
  EXPECT_FALSE(breaker_.Allow(clock_.now(), kDomain).allowed);  // the probe is in flight

  breaker_.Succeeded(probe);
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
  const BreakerPass next = breaker_.Allow(clock_.now(), kDomain);
  EXPECT_TRUE(next.allowed);
  EXPECT_FALSE(next.probe);
  EXPECT_EQ(breaker_.opens(), 1u);
}

TEST_F(BreakerTest, AFailedProbeOpensItAgainForAnotherOpenFor) {
  Open();
  clock_.Advance(500ms);
  const BreakerPass probe = breaker_.Allow(clock_.now(), kDomain);
  ASSERT_TRUE(probe.probe);
  clock_.Advance(100ms);
  breaker_.Failed(probe, clock_.now());
  EXPECT_EQ(breaker_.state(), BreakerState::kOpen);
  EXPECT_EQ(breaker_.opens(), 2u);
  clock_.Advance(499ms);
  EXPECT_FALSE(breaker_.Allow(clock_.now(), kDomain).allowed);
  clock_.Advance(1ms);
  EXPECT_TRUE(breaker_.Allow(clock_.now(), kDomain).probe);
}

TEST_F(BreakerTest, AReleasedProbeLetsTheNextCallProbe) {
  Open();
  clock_.Advance(500ms);
  breaker_.Released(breaker_.Allow(clock_.now(), kDomain));
  EXPECT_EQ(breaker_.state(), BreakerState::kHalfOpen);
  const BreakerPass next = breaker_.Allow(clock_.now(), kDomain);
  EXPECT_TRUE(next.allowed);
  EXPECT_TRUE(next.probe);
}

TEST_F(BreakerTest, AnswersToCallsFromBeforeItOpenedCountForNothing) {
  const BreakerPass early_success = breaker_.Allow(clock_.now(), kDomain);
  const BreakerPass early_failure = breaker_.Allow(clock_.now(), kDomain);
  Open();
  breaker_.Succeeded(early_success);
  EXPECT_EQ(breaker_.state(), BreakerState::kOpen);

  clock_.Advance(500ms);
  const BreakerPass probe = breaker_.Allow(clock_.now(), kDomain);
  breaker_.Succeeded(early_success);
  EXPECT_EQ(breaker_.state(), BreakerState::kHalfOpen);  // only the probe closes it
  breaker_.Succeeded(probe);
  ASSERT_EQ(breaker_.state(), BreakerState::kClosed);

  for (int i = 0; i < 3; ++i) breaker_.Failed(early_failure, clock_.now());
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
  EXPECT_EQ(breaker_.opens(), 1u);
}

TEST(BreakerStates, WorseIsOpenThenHalfOpenThenClosed) {
  EXPECT_EQ(Worse(BreakerState::kClosed, BreakerState::kHalfOpen), BreakerState::kHalfOpen);
  EXPECT_EQ(Worse(BreakerState::kOpen, BreakerState::kHalfOpen), BreakerState::kOpen);
  EXPECT_EQ(Worse(BreakerState::kClosed, BreakerState::kClosed), BreakerState::kClosed);
  EXPECT_EQ(Worse(BreakerState::kHalfOpen, BreakerState::kOpen), BreakerState::kOpen);
}

TEST(DomainBreakers, ADomainPerSlotAndTheWorstOfThemReported) {
  ManualClock clock;
  DomainBreakers breakers(BreakerOptions{.failures_to_open = 1, .open_for = 1s});
  EXPECT_EQ(&breakers.For(3), &breakers.For(3 + DomainBreakers::kSlots));
  EXPECT_NE(&breakers.For(3), &breakers.For(4));

  (void)breakers.For(1).Allow(clock.now(), 1);
  const BreakerPass failing = breakers.For(2).Allow(clock.now(), 2);
  breakers.For(2).Failed(failing, clock.now());
  EXPECT_EQ(breakers.worst(), BreakerState::kOpen);

  StoreHealthStats stats;
  breakers.Report(stats, [](uint32_t domain) { return "node-" + std::to_string(domain); });
  EXPECT_EQ(stats.breaker, BreakerState::kOpen);
  EXPECT_EQ(stats.breaker_opens, 1u);
  ASSERT_EQ(stats.breakers.size(), 2u);  // the unused ones are not listed
  EXPECT_EQ(stats.breakers[0].domain, "node-1");
  EXPECT_EQ(stats.breakers[0].state, BreakerState::kClosed);
  EXPECT_EQ(stats.breakers[1].domain, "node-2");
  EXPECT_EQ(stats.breakers[1].state, BreakerState::kOpen);
  EXPECT_EQ(stats.breakers[1].opens, 1u);
}

}  // namespace
}  // namespace sluice::resilience
