// Durations as people write them in flags and config files: "250ms", "10s", "1m", "2h" (also
// "us" and "d"). Parsing: a bare number, a negative value or an unknown unit is an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::config {

Result<Duration> ParseDuration(std::string_view text);

// `d` (>= 0) in the largest unit that counts it exactly, as ParseDuration reads it: "10s",
// "1500ms", "2h".
std::string FormatDuration(Duration d);

// `d` in whole milliseconds, rounded up: a wait printed this way is never too early. 0 for a
// negative `d` (a wait measured on a clock that stepped back).
int64_t CeilMillis(Duration d);

}  // namespace sluice::config
