#include "simulate/picture_frame.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "config/duration.h"

namespace sluice::simulate::picture {
namespace {

// Smallest of 1, 2, 5 × 10^k that is at least `rough`.
int64_t NiceStep(double rough) {
  int64_t magnitude = 1;
  while (static_cast<double>(magnitude) * 10 <= rough) magnitude *= 10;
  for (const int64_t m : {1, 2, 5}) {
    if (static_cast<double>(m * magnitude) >= rough) return m * magnitude;
  }
  return 10 * magnitude;
}

// From 0 to the first tick past `last_ms`, so that nothing is drawn on the edge.
TimeAxis TimeAxisTo(int64_t last_ms) {
  TimeAxis axis;
  axis.tick_ms = NiceStep(static_cast<double>(std::max<int64_t>(last_ms, 1000)) / 10);
  axis.end_ms = (last_ms / axis.tick_ms + 1) * axis.tick_ms;
  axis.seconds = axis.end_ms >= 2000;
  return axis;
}

std::vector<int64_t> UnitTicks(int64_t units_max) {
  const int64_t step = NiceStep(static_cast<double>(units_max) / 4);
  std::vector<int64_t> ticks;
  for (int64_t u = 0; u < units_max; u += step) {
    if (units_max - u >= step / 2.0) ticks.push_back(u);
  }
  ticks.push_back(units_max);
  return ticks;
}

}  // namespace

TimeAxis TimeAxisFor(const std::vector<int64_t>& request_times_ms, Duration max_wait) {
  return TimeAxisTo((request_times_ms.empty() ? 0 : request_times_ms.back()) +
                    config::CeilMillis(max_wait));
}

std::vector<Extent> MarkExtents(const Frame& frame, const Simulation& run) {
  std::vector<Extent> extents;
  for (const SimulatedRequest& request : run.requests) {
    const double t_ms = static_cast<double>(request.t_ms);
    const double x = frame.X(t_ms);
    const double slot = frame.X(t_ms + static_cast<double>(request.decision.delay.count()) / 1000);
    extents.push_back({x - kMarkRadius, std::max(x + kMarkRadius, slot)});
  }
  return extents;
}

std::vector<int> StackLevels(const std::vector<Extent>& extents) {
  using Busy = std::pair<double, int>;  // (x from which the level is free again, level)
  std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
  std::priority_queue<int, std::vector<int>, std::greater<int>> free;
  int next_level = 0;
  std::vector<int> levels;
  for (const Extent& extent : extents) {
    for (; !busy.empty() && busy.top().first <= extent.left; busy.pop()) {
      free.push(busy.top().second);
    }
    int level = next_level;
    if (free.empty()) {
      ++next_level;
    } else {
      level = free.top();
      free.pop();
    }
    busy.emplace(extent.right + 1, level);
    levels.push_back(level);
  }
  return levels;
}

Frame LayOutFrame(std::span<const Simulation> runs) {
  Frame frame;
  std::vector<int64_t> request_times;
  Duration max_wait(0);
  if (!runs.empty()) {
    for (const SimulatedRequest& request : runs.front().requests) {
      request_times.push_back(request.t_ms);
    }
    max_wait = runs.front().max_wait;
  }
  frame.time = TimeAxisFor(request_times, max_wait);
  int levels = 0;
  for (const Simulation& run : runs) {
    frame.units_max = std::max(frame.units_max, run.limit.capacity());
    const std::vector<int> stack = StackLevels(MarkExtents(frame, run));
    for (const int level : stack) levels = std::max(levels, level + 1);
  }
  frame.unit_ticks = UnitTicks(frame.units_max);
  frame.band_height = std::max(kMinBand, levels * kLevelSpacing + kBandPadding);
  if (frame.band_height > kMaxBand) {
    frame.band_height = kMaxBand;
    frame.level_spacing = (kMaxBand - kBandPadding - 2 * kMarkRadius) / (levels - 1);
  }
  return frame;
}

}  // namespace sluice::simulate::picture
