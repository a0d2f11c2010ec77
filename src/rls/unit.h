// The time units of envoyproxy/ratelimit's `rate_limit.unit`, numbered as Envoy's
// RateLimitResponse.RateLimit.Unit (WEEK came last, so it is 7). That service's units are fixed
// durations, not calendar ones: a month is 30 days and a year 365 days, and its windows start at
// whole multiples of the unit since the Unix epoch. Plain functions of their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sluice/clock.h"

namespace sluice::rls {

enum class Unit : uint8_t {
  kSecond = 1,
  kMinute = 2,
  kHour = 3,
  kDay = 4,
  kMonth = 5,
  kYear = 6,
  kWeek = 7,
};

// "second", "minute", "hour", "day", "week", "month", "year".
std::string_view UnitName(Unit unit);
// Case-insensitive, as that service reads its YAML ("Minute" and "MINUTE" are minute).
std::optional<Unit> ParseUnitName(std::string_view name);
// From the number on the wire (RateLimitResponse.RateLimit.Unit, and RateLimitUnit, which is the
// same without WEEK); nullopt for UNKNOWN (0) and numbers no unit has.
std::optional<Unit> UnitFromNumber(uint32_t number);
// The unit's fixed length: a month is 30 days, a year 365 days.
Duration UnitDuration(Unit unit);

}  // namespace sluice::rls
