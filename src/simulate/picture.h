// Pictures of `sluice simulate` runs (--svg): one panel per run, all on the same axes. Each panel
// shows the requests over time, stacked where they crowd (admitted, denied, and booked with a
// line to their slot), and below them what remains admissible as a line, with what the
// algorithm counts drawn behind: the windows, the period before the first denial, the bucket.
//
// Thread safety: plain functions with no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "simulate/simulate.h"

namespace sluice::simulate {

// When to peek at the allowance so that its line is drawn to within about two pixels: evenly over
// the time axis a picture of `trace` spans (which reaches past the last request by `max_wait`).
std::vector<int64_t> AllowanceSampleTimes(const Trace& trace, Duration max_wait);

// The SVG document: `title` above one panel per run. The runs are of one trace, decided to its
// end, with the allowance sampled at AllowanceSampleTimes.
std::string DrawPicture(std::span<const Simulation> runs, std::string_view title);

}  // namespace sluice::simulate
