// The units of envoyproxy/ratelimit: names in any case, wire numbers, and fixed lengths (a month
// is 30 days and a year 365, as that service's UnitToDivider has them).
#include "rls/unit.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::rls {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

TEST(RlsUnit, FixedLengths) {
  EXPECT_EQ(UnitDuration(Unit::kSecond), seconds(1));
  EXPECT_EQ(UnitDuration(Unit::kMinute), seconds(60));
  EXPECT_EQ(UnitDuration(Unit::kHour), hours(1));
  EXPECT_EQ(UnitDuration(Unit::kDay), hours(24));
  EXPECT_EQ(UnitDuration(Unit::kWeek), hours(24 * 7));
  EXPECT_EQ(UnitDuration(Unit::kMonth), hours(24 * 30));
  EXPECT_EQ(UnitDuration(Unit::kYear), hours(24 * 365));
}

TEST(RlsUnit, NamesInAnyCase) {
  EXPECT_EQ(ParseUnitName("second"), Unit::kSecond);
  EXPECT_EQ(ParseUnitName("Minute"), Unit::kMinute);
  EXPECT_EQ(ParseUnitName("HOUR"), Unit::kHour);
  EXPECT_EQ(ParseUnitName("dAy"), Unit::kDay);
  EXPECT_EQ(ParseUnitName("week"), Unit::kWeek);
  EXPECT_EQ(ParseUnitName("month"), Unit::kMonth);
  EXPECT_EQ(ParseUnitName("year"), Unit::kYear);
  EXPECT_EQ(ParseUnitName("unknown"), std::nullopt);
  EXPECT_EQ(ParseUnitName(""), std::nullopt);
  EXPECT_EQ(ParseUnitName("seconds"), std::nullopt);
  EXPECT_EQ(ParseUnitName("1s"), std::nullopt);
  for (Unit unit : {Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay, Unit::kWeek,
                    Unit::kMonth, Unit::kYear}) {
    EXPECT_EQ(ParseUnitName(UnitName(unit)), unit);
  }
}

TEST(RlsUnit, WireNumbers) {
  EXPECT_EQ(UnitFromNumber(0), std::nullopt);  // UNKNOWN
  EXPECT_EQ(UnitFromNumber(1), Unit::kSecond);
  EXPECT_EQ(UnitFromNumber(4), Unit::kDay);
  EXPECT_EQ(UnitFromNumber(5), Unit::kMonth);
  EXPECT_EQ(UnitFromNumber(6), Unit::kYear);
  EXPECT_EQ(UnitFromNumber(7), Unit::kWeek);
  EXPECT_EQ(UnitFromNumber(8), std::nullopt);
}

}  // namespace
}  // namespace sluice::rls
