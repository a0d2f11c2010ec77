// The units of envoyproxy/ratelimit's rate limits: names, wire numbers and fixed lengths.
#include "rls/unit.h"

#include <chrono>

namespace sluice::rls {
namespace {

struct UnitInfo {
  Unit unit;
  std::string_view name;
  int64_t seconds;
};

constexpr int64_t kDaySeconds = 24 * 60 * 60;
constexpr UnitInfo kUnits[] = {
    {Unit::kSecond, "second", 1},
    {Unit::kMinute, "minute", 60},
    {Unit::kHour, "hour", 60 * 60},
    {Unit::kDay, "day", kDaySeconds},
    {Unit::kWeek, "week", 7 * kDaySeconds},
    {Unit::kMonth, "month", 30 * kDaySeconds},
    {Unit::kYear, "year", 365 * kDaySeconds},
};

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string_view UnitName(Unit unit) {
  for (const UnitInfo& info : kUnits) {
    if (info.unit == unit) return info.name;
  }
  return "unknown";
}

std::optional<Unit> ParseUnitName(std::string_view name) {
  for (const UnitInfo& info : kUnits) {
    if (info.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) same = AsciiLower(name[i]) == info.name[i];
    if (same) return info.unit;
  }
  return std::nullopt;
}

std::optional<Unit> UnitFromNumber(uint32_t number) {
  for (const UnitInfo& info : kUnits) {
    if (static_cast<uint32_t>(info.unit) == number) return info.unit;
  }
  return std::nullopt;
}

Duration UnitDuration(Unit unit) {
  for (const UnitInfo& info : kUnits) {
    if (info.unit == unit) return std::chrono::seconds(info.seconds);
  }
  return Duration(0);
}

}  // namespace sluice::rls
