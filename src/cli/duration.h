// Parsing durations as people write them in flags and config files: "250ms", "10s", "1m", "2h"
// (also "us" and "d"). A bare number, a negative value or an unknown unit is an error.
#pragma once

#include <string_view>

#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::cli {

Result<Duration> ParseDuration(std::string_view text);

}  // namespace sluice::cli
