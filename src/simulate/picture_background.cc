#include "simulate/picture_background.h"

#include <algorithm>

#include "config/duration.h"

namespace sluice::simulate::picture {
namespace {

constexpr const char* kWindowShade = "#e3e8eb";
constexpr const char* kWindowEdge = "#78909c";
constexpr const char* kSpanColour = "#ffb300";
constexpr const char* kTokensColour = "#1565c0";
constexpr const char* kLevelColour = "#00838f";

// A duration for a caption: as a flag would say it when that is short ("2s"), else in
// milliseconds with two decimals ("3333.33ms").
std::string ReadableDuration(Duration d) {
  if (d.count() % 1000 == 0) return config::FormatDuration(d);
  return FormatSvgNumber(static_cast<double>(d.count()) / 1000) + "ms";
}

const SimulatedRequest* LastDenial(const Simulation& run) {
  for (auto request = run.requests.rbegin(); request != run.requests.rend(); ++request) {
    if (!request->decision.allowed) return &*request;
  }
  return nullptr;
}

// Windows are drawn when they are at least this wide; narrower ones would be a grey smear.
constexpr double kMinWindowWidth = 4;

bool DrawsWindows(const Frame& frame, const Limit& limit) {
  const double width = frame.X(static_cast<double>(limit.period().count()) / 1000) - kLeft;
  return (limit.algorithm() == Algorithm::kFixedWindow ||
          limit.algorithm() == Algorithm::kSlidingWindow) &&
         width >= kMinWindowWidth;
}

bool DrawsSpan(const Limit& limit) {
  return limit.algorithm() == Algorithm::kSlidingLog ||
         limit.algorithm() == Algorithm::kSlidingWindow;
}

void DrawWindows(SvgWriter& svg, const Frame& frame, const Limit& limit) {
  const double period_ms = static_cast<double>(limit.period().count()) / 1000;
  const double end = static_cast<double>(frame.time.end_ms);
  svg.Open("g", {{"class", "windows"}});
  for (int64_t k = 0; static_cast<double>(k) * period_ms < end; ++k) {
    const double from = frame.X(static_cast<double>(k) * period_ms);
    const double to = frame.X(std::min(end, static_cast<double>(k + 1) * period_ms));
    if (k % 2 == 1) {
      svg.Element("rect", {{"x", from},
                           {"y", frame.BandTop()},
                           {"width", to - from},
                           {"height", frame.PlotBottom() - frame.BandTop()},
                           {"fill", kWindowShade}});
    }
    if (k > 0) {
      svg.Element("line", {{"x1", from},
                           {"y1", frame.BandTop()},
                           {"x2", from},
                           {"y2", frame.PlotBottom()},
                           {"stroke", kWindowEdge},
                           {"stroke-dasharray", "4 3"}});
    }
  }
  svg.Close();
}

// The period that the last denial looked back over.
void DrawSpan(SvgWriter& svg, const Frame& frame, const Simulation& run) {
  const SimulatedRequest* denial = LastDenial(run);
  if (denial == nullptr) return;
  const double to_ms = static_cast<double>(denial->t_ms);
  const double from_ms =
      std::max(0.0, to_ms - static_cast<double>(run.limit.period().count()) / 1000);
  const double from = frame.X(from_ms), to = frame.X(to_ms);
  svg.Element("rect", {{"class", "span"},
                       {"x", from},
                       {"y", frame.BandTop()},
                       {"width", std::max(1.0, to - from)},
                       {"height", frame.PlotBottom() - frame.BandTop()},
                       {"fill", kSpanColour},
                       {"fill-opacity", 0.22}});
}

}  // namespace

BucketArea BucketAreaOf(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kTokenBucket:
      return {kTokensColour, true};
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
      return {kLevelColour, false};
    default:
      return {};
  }
}

std::string Caption(const Frame& frame, const Simulation& run) {
  const Limit& limit = run.limit;
  const std::string period = config::FormatDuration(limit.period());
  const std::string every = ReadableDuration(limit.emission_interval());
  const std::string capacity = std::to_string(limit.capacity());
  const SimulatedRequest* denial = LastDenial(run);
  const std::string span = denial == nullptr
                               ? "no denial"
                               : "amber: the " + period + " up to the last denial (at " +
                                     std::to_string(denial->t_ms) + " ms)";
  const std::string windows = DrawsWindows(frame, limit) ? "grey bands: the " + period + " windows"
                                                         : "windows too narrow to draw";
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
      return windows + "; each admits " + capacity + ", then denies until the next";
    case Algorithm::kSlidingLog:
      if (denial == nullptr) {
        return "no denial: no request found " + capacity + " admissions in the " + period +
               " before it";
      }
      return span + ", whose admissions had used up the limit";
    case Algorithm::kSlidingWindow:
      return windows + ", the previous one weighted by its overlap; " + span;
    case Algorithm::kTokenBucket:
      return "blue area: the tokens in the bucket, one more every " + every + " up to " + capacity;
    case Algorithm::kLeakyBucket:
      return "teal area: the bucket's level, draining one unit every " + every + "; it holds " +
             capacity;
    case Algorithm::kGcra:
      return "teal area: the theoretical arrival time ahead of now, in units of " + every +
             " (the leaky bucket's level)";
  }
  return "";
}

void DrawBackground(SvgWriter& svg, const Frame& frame, const Simulation& run) {
  if (DrawsWindows(frame, run.limit)) DrawWindows(svg, frame, run.limit);
  if (DrawsSpan(run.limit)) DrawSpan(svg, frame, run);
}

}  // namespace sluice::simulate::picture
