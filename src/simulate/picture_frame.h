// The layout of `sluice simulate`'s pictures (simulate/picture.h): the page's geometry and colours,
// the time and units axes every panel shares, and where each request's mark goes, stacked up
// where marks would touch.
//
// Thread safety: plain functions and values with no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "simulate/simulate.h"
#include "sluice/clock.h"

namespace sluice::simulate::picture {

// Page geometry, in pixels.
inline constexpr double kWidth = 900;
inline constexpr double kLeft = 84;  // room for the y labels
inline constexpr double kRight = 20;
inline constexpr double kPlotWidth = kWidth - kLeft - kRight;
inline constexpr double kHeader = 44;  // a panel's title and caption
inline constexpr double kMarkRadius = 3.5;
inline constexpr double kLevelSpacing = 8;  // between marks stacked at one time
inline constexpr double kBandPadding = 6;
inline constexpr double kMinBand = 28;
inline constexpr double kMaxBand = 128;
inline constexpr double kGap = 8;  // between the requests band and the allowance plot
inline constexpr double kAllowanceHeight = 110;
inline constexpr double kAxis = 42;              // tick labels and the axis title
inline constexpr double kHeadlineBaseline = 28;  // the picture's title, above the legend

// The colours of what the legend explains.
inline constexpr const char* kAdmittedColour = "#2e7d32";
inline constexpr const char* kBookedColour = "#ef6c00";
inline constexpr const char* kRemainingColour = "#1565c0";
inline constexpr const char* kCapacityColour = "#37474f";

struct TimeAxis {
  int64_t end_ms = 0;  // the axis runs from 0 to end_ms
  int64_t tick_ms = 0;
  bool seconds = false;  // labelled in seconds rather than milliseconds
};

// The axis of a picture of requests at `request_times_ms` (from the first run's trace, which
// every run shares), reaching past the last by `max_wait`, the furthest a slot may be booked.
TimeAxis TimeAxisFor(const std::vector<int64_t>& request_times_ms, Duration max_wait);

// The horizontal room a request's mark takes: the mark, and a booked request's line to its slot.
struct Extent {
  double left = 0, right = 0;
};

// What every panel shares: the same axes, the same band height.
struct Frame {
  TimeAxis time;
  int64_t units_max = 1;  // the top of the allowance plot: the largest capacity
  std::vector<int64_t> unit_ticks;
  double band_height = kMinBand;
  double level_spacing = kLevelSpacing;

  double X(double t_ms) const {
    return kLeft + t_ms / static_cast<double>(time.end_ms) * kPlotWidth;
  }
  double BandTop() const { return kHeader; }
  double BandBottom() const { return kHeader + band_height; }
  double PlotTop() const { return BandBottom() + kGap; }
  double PlotBottom() const { return PlotTop() + kAllowanceHeight; }
  double Y(double units) const {
    return PlotBottom() - units / static_cast<double>(units_max) * kAllowanceHeight;
  }
  double MarkY(int level) const {
    return BandBottom() - kBandPadding / 2 - kMarkRadius - level * level_spacing;
  }
  double PanelHeight() const { return PlotBottom() + kAxis; }
};

// The room each request's mark takes in `run`, on `frame`'s time axis.
std::vector<Extent> MarkExtents(const Frame& frame, const Simulation& run);

// Which level, counted from the bottom, each mark takes (left to right) so that marks whose
// extents would touch stack up instead of hiding each other.
std::vector<int> StackLevels(const std::vector<Extent>& extents);

// The frame of a picture of `runs`: the time axis of their trace, the units axis up to the
// largest capacity, and a band tall enough for the highest stack of marks.
Frame LayOutFrame(std::span<const Simulation> runs);

}  // namespace sluice::simulate::picture
