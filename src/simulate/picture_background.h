// What each algorithm counts, drawn behind the requests of a panel of `sluice simulate`'s
// pictures, and the caption that says what is drawn: the fixed and sliding windows, the period
// the last denial of sliding_log and sliding_window looked back over, and the area of the bucket
// (token_bucket's tokens, leaky_bucket's and gcra's level) against the allowance line.
//
// Thread safety: plain functions with no shared state.
#pragma once

#include <string>

#include "simulate/picture_frame.h"
#include "simulate/simulate.h"
#include "simulate/svg.h"

namespace sluice::simulate::picture {

// What the shaded area under or over the allowance line is, and its colour; none for the window
// algorithms.
struct BucketArea {
  const char* colour = nullptr;
  bool below_line = false;  // tokens fill up to the line; a level fills down from the capacity
};

BucketArea BucketAreaOf(Algorithm algorithm);

// The panel's caption: what its background shows.
std::string Caption(const Frame& frame, const Simulation& run);

// The windows, or the period before the last denial, behind the requests; nothing for the
// buckets, whose area goes with the allowance line.
void DrawBackground(SvgWriter& svg, const Frame& frame, const Simulation& run);

}  // namespace sluice::simulate::picture
