// The legend of `sluice simulate`'s pictures: a sample and the words for each kind of mark and
// line (the booked requests only when a run shapes), laid out in rows under the headline.
//
// Thread safety: plain functions with no shared state.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "simulate/simulate.h"
#include "simulate/svg.h"

namespace sluice::simulate::picture {

// One legend entry: its swatch drawn at (x, baseline), then its words.
struct LegendEntry {
  std::function<void(SvgWriter&, double, double)> swatch;
  std::string words;
};

struct PlacedEntry {
  LegendEntry entry;
  double x = 0, baseline = 0;
};

// The legend of a picture of `runs`, in rows from kHeadlineBaseline down.
std::vector<PlacedEntry> PlaceLegend(std::span<const Simulation> runs);
void DrawLegend(SvgWriter& svg, const std::vector<PlacedEntry>& placed);

}  // namespace sluice::simulate::picture
