#include "config/duration.h"

#include <charconv>
#include <iterator>
#include <limits>
#include <string>

namespace sluice::config {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t micros;
};

constexpr Unit kUnits[] = {
    {"us", 1},         {"ms", 1'000},        {"s", 1'000'000},
    {"m", 60'000'000}, {"h", 3'600'000'000}, {"d", 86'400'000'000},
};

}  // namespace

Result<Duration> ParseDuration(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("bad duration '" + std::string(text) + "': " + std::string(why));
  };
  int64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data()) return bad("expected a whole number and a unit");
  if (number < 0) return bad("must not be negative");
  const std::string_view suffix(end, text.data() + text.size() - end);
  if (suffix.empty()) return bad("missing unit (us, ms, s, m, h or d)");
  for (const auto& unit : kUnits) {
    if (unit.suffix != suffix) continue;
    if (number > std::numeric_limits<int64_t>::max() / unit.micros) return bad("too large");
    return Duration(number * unit.micros);
  }
  return bad("unknown unit '" + std::string(suffix) + "' (us, ms, s, m, h or d)");
}

std::string FormatDuration(Duration d) {
  if (d.count() == 0) return "0s";
  auto unit = std::rbegin(kUnits);
  while (d.count() % unit->micros != 0) ++unit;  // stops at "us" at the latest
  return std::to_string(d.count() / unit->micros) + std::string(unit->suffix);
}

int64_t CeilMillis(Duration d) { return d.count() <= 0 ? 0 : (d.count() + 999) / 1000; }

}  // namespace sluice::config
