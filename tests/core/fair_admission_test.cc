#include "core/fair_admission.h"

#include <gtest/gtest.h>

#include <chrono>
#include <utility>
#include <vector>

namespace sluice::core {
namespace {

using std::chrono::milliseconds;

FairAdmission Fixed(size_t budget) {
  return FairAdmission({.max_budget = budget, .min_budget = budget});
}

TEST(FairAdmissionTest, AdmitsWhileTheBudgetHasRoom) {
  FairAdmission admission = Fixed(100);
  FairAdmission::Ticket a = admission.Admit(1, 60);
  FairAdmission::Ticket b = admission.Admit(2, 40);
  EXPECT_EQ(a.units(), 60u);
  EXPECT_EQ(b.units(), 40u);
  EXPECT_EQ(admission.in_flight(), 100u);
  EXPECT_EQ(admission.refused(), 0u);
}

TEST(FairAdmissionTest, RefusesWhatWouldTakeACallerPastItsShareOfABusyInstance) {
  FairAdmission admission = Fixed(100);
  FairAdmission::Ticket first = admission.Admit(1, 100);
  ASSERT_TRUE(first);
  // Two callers would hold work: a share is 50.
  EXPECT_FALSE(admission.Admit(2, 51));
  EXPECT_EQ(admission.refused(), 1u);
  // The caller holding the budget gets nothing more, not even a single check.
  EXPECT_FALSE(admission.Admit(1, 1));
  EXPECT_FALSE(admission.Admit(1, 5, /*partial=*/true));
  EXPECT_EQ(admission.in_flight(), 100u);
}

TEST(FairAdmissionTest, ACallerWithinItsShareTakesFromTheReserve) {
  FairAdmission admission = Fixed(100);
  FairAdmission::Ticket first = admission.Admit(1, 100);
  // Two callers: a share is 50, but the reserve holds 25.
  EXPECT_FALSE(admission.Admit(2, 26));
  FairAdmission::Ticket second = admission.Admit(2, 20);
  EXPECT_TRUE(second);
  EXPECT_FALSE(admission.Admit(3, 6));
  FairAdmission::Ticket third = admission.Admit(3, 5);
  EXPECT_TRUE(third);
  EXPECT_EQ(admission.in_flight(), 125u);
  // The reserve is spent: only single checks of callers holding nothing go now.
  EXPECT_FALSE(admission.Admit(4, 2));
  EXPECT_FALSE(admission.Admit(2, 1));
  EXPECT_TRUE(admission.Admit(4, 1));
}

TEST(FairAdmissionTest, APartialRequestGetsWhatItsShareAllows) {
  FairAdmission admission = Fixed(100);
  FairAdmission::Ticket first = admission.Admit(1, 1000, /*partial=*/true);
  EXPECT_EQ(first.units(), 100u);
  // The reserve's 25, within a share of 50.
  FairAdmission::Ticket second = admission.Admit(2, 1000, /*partial=*/true);
  EXPECT_EQ(second.units(), 25u);
  // Nothing left but a single check.
  FairAdmission::Ticket third = admission.Admit(3, 1000, /*partial=*/true);
  EXPECT_EQ(third.units(), 1u);
  EXPECT_EQ(admission.in_flight(), 126u);
  second.Release();
  // A share of three is 33, out of the 24 the reserve now holds.
  FairAdmission::Ticket fourth = admission.Admit(4, 1000, /*partial=*/true);
  EXPECT_EQ(fourth.units(), 24u);
}

TEST(FairAdmissionTest, ASingleCheckOfACallerHoldingNothingAlwaysGoes) {
  FairAdmission admission = Fixed(10);
  std::vector<FairAdmission::Ticket> held;
  held.push_back(admission.Admit(1, 10));
  held.push_back(admission.Admit(2, 2));
  for (FairAdmission::Caller c = 100; c < 200; ++c) {
    held.push_back(admission.Admit(c, 1));
    EXPECT_TRUE(held.back()) << c;
  }
  EXPECT_EQ(admission.in_flight(), 112u);
  EXPECT_FALSE(admission.Admit(1000, 2));
}

TEST(FairAdmissionTest, GivingBackFreesTheUnits) {
  FairAdmission admission = Fixed(100);
  FairAdmission::Ticket a = admission.Admit(1, 100);
  EXPECT_FALSE(admission.Admit(2, 100));
  a.Release();
  a.Release();  // once only
  a.Answered(milliseconds(1));
  EXPECT_EQ(admission.in_flight(), 0u);
  {
    FairAdmission::Ticket b = admission.Admit(2, 100);
    EXPECT_TRUE(b);
    FairAdmission::Ticket moved = std::move(b);
    EXPECT_FALSE(b);
    EXPECT_TRUE(moved);
    EXPECT_EQ(admission.in_flight(), 100u);
  }
  EXPECT_EQ(admission.in_flight(), 0u);
  // A caller's own requests add up, and each gives back its own.
  FairAdmission::Ticket c1 = admission.Admit(3, 30);
  FairAdmission::Ticket c2 = admission.Admit(3, 30);
  c1.Answered(milliseconds(1));
  EXPECT_EQ(admission.in_flight(), 30u);
  EXPECT_TRUE(admission.Admit(4, 70));
}

TEST(FairAdmissionTest, AnIdleInstanceTakesARequestLargerThanTheBudget) {
  FairAdmission admission = Fixed(10);
  FairAdmission::Ticket whole = admission.Admit(1, 50);
  EXPECT_EQ(whole.units(), 50u);
  EXPECT_FALSE(admission.Admit(2, 50));
  EXPECT_FALSE(admission.Admit(2, 2));
  EXPECT_TRUE(admission.Admit(2, 1));
  whole.Release();
  // One that can go in parts gets its share only.
  EXPECT_EQ(admission.Admit(3, 50, /*partial=*/true).units(), 10u);
}

TEST(FairAdmissionTest, ARefusalHoldsNothing) {
  FairAdmission admission = Fixed(10);
  FairAdmission::Ticket a = admission.Admit(1, 10);
  FairAdmission::Ticket refused = admission.Admit(2, 10);
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.units(), 0u);
  refused.Release();
  EXPECT_EQ(admission.in_flight(), 10u);
  // Zero units count as one.
  a.Release();
  FairAdmission::Ticket zero = admission.Admit(5, 0);
  EXPECT_EQ(admission.in_flight(), 1u);
}

TEST(FairAdmissionTest, TheBudgetShrinksWhenTheStoreAnswersLateAndGrowsBack) {
  FairAdmission admission({.max_budget = 1000, .min_budget = 32, .target = milliseconds(20)});
  EXPECT_EQ(admission.budget(), 1000u);
  // Two requests admitted under the same budget answer late: one cut, not two.
  FairAdmission::Ticket a = admission.Admit(1, 10);
  FairAdmission::Ticket b = admission.Admit(2, 10);
  a.Answered(milliseconds(30));
  EXPECT_EQ(admission.budget(), 750u);
  b.Answered(milliseconds(30));
  EXPECT_EQ(admission.budget(), 750u);
  // Each late one admitted since cuts again, down to the floor.
  for (int i = 0; i < 40; ++i) admission.Admit(1, 1).Answered(milliseconds(21));
  EXPECT_EQ(admission.budget(), 32u);
  // Between half the target and the target: no change.
  admission.Admit(1, 1).Answered(milliseconds(15));
  EXPECT_EQ(admission.budget(), 32u);
  // Within half the target: 1 more each.
  admission.Admit(1, 32).Answered(milliseconds(10));
  EXPECT_EQ(admission.budget(), 33u);
  for (int i = 0; i < 2000; ++i) admission.Admit(1, 1).Answered(milliseconds(1));
  EXPECT_EQ(admission.budget(), 1000u);
  // Given back without a time: no change.
  admission.Admit(1, 1).Release();
  EXPECT_EQ(admission.budget(), 1000u);
}

TEST(FairAdmissionTest, ASmallerBudgetAdmitsLess) {
  FairAdmission admission({.max_budget = 100, .min_budget = 10, .target = milliseconds(20)});
  for (int i = 0; i < 20; ++i) admission.Admit(1, 1).Answered(milliseconds(50));
  ASSERT_EQ(admission.budget(), 10u);
  FairAdmission::Ticket a = admission.Admit(1, 100, /*partial=*/true);
  EXPECT_EQ(a.units(), 10u);
  EXPECT_FALSE(admission.Admit(2, 3));  // the reserve holds 2
  EXPECT_TRUE(admission.Admit(2, 2));
}

}  // namespace
}  // namespace sluice::core
