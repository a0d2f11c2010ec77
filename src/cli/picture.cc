#include "cli/picture.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "cli/svg.h"
#include "config/duration.h"

namespace sluice::cli {
namespace {

// Page geometry, in pixels.
constexpr double kWidth = 900;
constexpr double kLeft = 84;  // room for the y labels
constexpr double kRight = 20;
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr double kHeadlineBaseline = 28;
constexpr double kLegendRowHeight = 20;
constexpr double kLegendSwatch = 24;  // width of an entry's sample
constexpr double kHeader = 44;        // a panel's title and caption
constexpr double kMarkRadius = 3.5;
constexpr double kLevelSpacing = 8;  // between marks stacked at one time
constexpr double kBandPadding = 6;
constexpr double kMinBand = 28;
constexpr double kMaxBand = 128;
constexpr double kGap = 8;  // between the requests band and the allowance plot
constexpr double kAllowanceHeight = 110;
constexpr double kAxis = 42;  // tick labels and the axis title
constexpr double kPanelGap = 16;
constexpr double kCharWidth = 6.6;  // a 12 px character, generously, to lay out the legend
constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";

constexpr const char* kAdmittedColour = "#2e7d32";
constexpr const char* kDeniedColour = "#c62828";
constexpr const char* kBookedColour = "#ef6c00";
constexpr const char* kRemainingColour = "#1565c0";
constexpr const char* kCapacityColour = "#37474f";
constexpr const char* kFrameColour = "#b0bec5";
constexpr const char* kGridColour = "#eceff1";
constexpr const char* kWindowShade = "#e3e8eb";
constexpr const char* kWindowEdge = "#78909c";
constexpr const char* kSpanColour = "#ffb300";
constexpr const char* kTokensColour = "#1565c0";
constexpr const char* kLevelColour = "#00838f";
constexpr const char* kMutedColour = "#455a64";

// Smallest of 1, 2, 5 × 10^k that is at least `rough`.
int64_t NiceStep(double rough) {
  int64_t magnitude = 1;
  while (static_cast<double>(magnitude) * 10 <= rough) magnitude *= 10;
  for (const int64_t m : {1, 2, 5}) {
    if (static_cast<double>(m * magnitude) >= rough) return m * magnitude;
  }
  return 10 * magnitude;
}

struct TimeAxis {
  int64_t end_ms = 0;  // the axis runs from 0 to end_ms
  int64_t tick_ms = 0;
  bool seconds = false;  // labelled in seconds rather than milliseconds
};

// From 0 to the first tick past `last_ms`, so that nothing is drawn on the edge.
TimeAxis TimeAxisTo(int64_t last_ms) {
  TimeAxis axis;
  axis.tick_ms = NiceStep(static_cast<double>(std::max<int64_t>(last_ms, 1000)) / 10);
  axis.end_ms = (last_ms / axis.tick_ms + 1) * axis.tick_ms;
  axis.seconds = axis.end_ms >= 2000;
  return axis;
}

// The last instant a picture shows: the last request, or the slot it may have booked.
TimeAxis TimeAxisFor(const std::vector<int64_t>& request_times_ms, Duration max_wait) {
  return TimeAxisTo((request_times_ms.empty() ? 0 : request_times_ms.back()) +
                    config::CeilMillis(max_wait));
}

std::string TimeLabel(int64_t t_ms, bool seconds) {
  return seconds ? FormatSvgNumber(static_cast<double>(t_ms) / 1000) : std::to_string(t_ms);
}

// A duration for a caption: as a flag would say it when that is short ("2s"), else in
// milliseconds with two decimals ("3333.33ms").
std::string ReadableDuration(Duration d) {
  if (d.count() % 1000 == 0) return config::FormatDuration(d);
  return FormatSvgNumber(static_cast<double>(d.count()) / 1000) + "ms";
}

// The horizontal room a request's mark takes: the mark, and a booked request's line to its slot.
struct Extent {
  double left = 0, right = 0;
};

// Which level, counted from the bottom, each mark takes (left to right) so that marks whose
// extents would touch stack up instead of hiding each other.
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

std::vector<int64_t> UnitTicks(int64_t units_max) {
  const int64_t step = NiceStep(static_cast<double>(units_max) / 4);
  std::vector<int64_t> ticks;
  for (int64_t u = 0; u < units_max; u += step) {
    if (units_max - u >= step / 2.0) ticks.push_back(u);
  }
  ticks.push_back(units_max);
  return ticks;
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

std::string PanelTitle(const Simulation& run) {
  const Limit& limit = run.limit;
  std::string title = std::string(AlgorithmName(limit.algorithm())) + ": " +
                      std::to_string(limit.count()) + " per " +
                      config::FormatDuration(limit.period());
  if (IsMeter(limit.algorithm())) title += ", burst " + std::to_string(limit.capacity());
  if (run.max_wait.count() > 0) title += ", max wait " + config::FormatDuration(run.max_wait);
  return title;
}

std::string Counts(const Simulation& run) {
  int64_t admitted = 0, booked = 0, denied = 0;
  for (const SimulatedRequest& request : run.requests) {
    const Decision& d = request.decision;
    if (!d.allowed) {
      ++denied;
    } else if (d.delay.count() > 0) {
      ++booked;
    } else {
      ++admitted;
    }
  }
  std::string counts = std::to_string(admitted) + " admitted";
  if (run.max_wait.count() > 0) counts += " at once, " + std::to_string(booked) + " booked";
  return counts + ", " + std::to_string(denied) + " denied";
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

// What the shaded area under or over the allowance line is, and its colour; none for the window
// algorithms.
struct BucketArea {
  const char* colour = nullptr;
  bool below_line = false;  // tokens fill up to the line; a level fills down from the capacity
};

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

// A denied request: a cross.
void DrawCross(SvgWriter& svg, double x, double y, const char* css_class, const std::string& tip) {
  const double r = kMarkRadius;
  SvgPath cross;
  cross.MoveTo(x - r, y - r).LineTo(x + r, y + r).MoveTo(x - r, y + r).LineTo(x + r, y - r);
  svg.Open("path", {{"class", css_class},
                    {"d", cross.data()},
                    {"stroke", kDeniedColour},
                    {"stroke-width", 1.8},
                    {"fill", "none"}});
  if (!tip.empty()) svg.Text("title", {}, tip);
  svg.Close();
}

void DrawDot(SvgWriter& svg, double x, double y, const char* colour, const char* css_class,
             const std::string& tip) {
  svg.Open("circle",
           {{"class", css_class}, {"cx", x}, {"cy", y}, {"r", kMarkRadius}, {"fill", colour}});
  if (!tip.empty()) svg.Text("title", {}, tip);
  svg.Close();
}

std::string Tip(const SimulatedRequest& request) {
  const Decision& d = request.decision;
  std::string tip =
      "t = " + std::to_string(request.t_ms) + " ms, cost " + std::to_string(request.cost) + ": ";
  if (!d.allowed) {
    return tip + "denied, retry after " + std::to_string(config::CeilMillis(d.retry_after)) + " ms";
  }
  tip += "admitted, remaining " + std::to_string(d.remaining);
  if (d.delay.count() > 0) tip += ", waits " + std::to_string(config::CeilMillis(d.delay)) + " ms";
  return tip;
}

void DrawMarks(SvgWriter& svg, const Frame& frame, const Simulation& run,
               const std::vector<int>& levels) {
  svg.Open("g", {{"class", "requests"}});
  for (size_t i = 0; i < run.requests.size(); ++i) {
    const SimulatedRequest& request = run.requests[i];
    const double x = frame.X(static_cast<double>(request.t_ms));
    const double y = frame.MarkY(levels[i]);
    const Decision& d = request.decision;
    if (!d.allowed) {
      DrawCross(svg, x, y, "denied", Tip(request));
    } else if (d.delay.count() > 0) {
      const double slot =
          frame.X(static_cast<double>(request.t_ms) + static_cast<double>(d.delay.count()) / 1000);
      svg.Element(
          "path",
          {{"class", "wait"},
           {"d",
            SvgPath().MoveTo(x, y).HorizontalTo(slot).MoveTo(slot, y - 3).VerticalTo(y + 3).data()},
           {"stroke", kBookedColour},
           {"stroke-width", 1.2},
           {"fill", "none"}});
      DrawDot(svg, x, y, kBookedColour, "admitted booked", Tip(request));
    } else {
      DrawDot(svg, x, y, kAdmittedColour, "admitted", Tip(request));
    }
  }
  svg.Close();
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

void DrawTimeAxis(SvgWriter& svg, const Frame& frame) {
  const double bottom = frame.PlotBottom();
  svg.Open("g", {{"class", "time-axis"}, {"fill", kMutedColour}});
  for (int64_t t = 0; t <= frame.time.end_ms; t += frame.time.tick_ms) {
    const double x = frame.X(static_cast<double>(t));
    svg.Element(
        "line",
        {{"x1", x}, {"y1", bottom}, {"x2", x}, {"y2", bottom + 4}, {"stroke", kMutedColour}});
    svg.Text("text", {{"x", x}, {"y", bottom + 16}, {"text-anchor", "middle"}},
             TimeLabel(t, frame.time.seconds));
  }
  svg.Text("text", {{"x", kLeft + kPlotWidth / 2}, {"y", bottom + 34}, {"text-anchor", "middle"}},
           frame.time.seconds ? "time (s)" : "time (ms)");
  svg.Close();
}

void DrawUnitsAxis(SvgWriter& svg, const Frame& frame) {
  svg.Open("g", {{"class", "units-axis"}, {"fill", kMutedColour}});
  for (const int64_t u : frame.unit_ticks) {
    const double y = frame.Y(static_cast<double>(u));
    if (u > 0) {
      svg.Element("line", {{"x1", kLeft},
                           {"y1", y},
                           {"x2", kLeft + kPlotWidth},
                           {"y2", y},
                           {"stroke", kGridColour}});
    }
    svg.Text("text", {{"x", kLeft - 6}, {"y", y + 4}, {"text-anchor", "end"}}, std::to_string(u));
  }
  const double middle = (frame.PlotTop() + frame.PlotBottom()) / 2;
  svg.Text("text",
           {{"x", 0},
            {"y", 0},
            {"text-anchor", "middle"},
            {"transform", "translate(" + FormatSvgNumber(kLeft - 46) + " " +
                              FormatSvgNumber(middle) + ") rotate(-90)"}},
           "remaining (units)");
  svg.Text("text",
           {{"x", kLeft - 6},
            {"y", (frame.BandTop() + frame.BandBottom()) / 2 + 4},
            {"text-anchor", "end"}},
           "requests");
  svg.Close();
}

// The allowance as a step line through every sample, and the bucket's area against it.
void DrawAllowance(SvgWriter& svg, const Frame& frame, const Simulation& run) {
  if (run.allowance.empty()) return;
  SvgPath line;
  line.MoveTo(frame.X(static_cast<double>(run.allowance.front().t_ms)),
              frame.Y(static_cast<double>(run.allowance.front().remaining)));
  int64_t drawn = run.allowance.front().remaining;
  for (const Allowance& a : run.allowance) {
    if (a.remaining == drawn) continue;  // the line goes on flat
    line.HorizontalTo(frame.X(static_cast<double>(a.t_ms)))
        .VerticalTo(frame.Y(static_cast<double>(a.remaining)));
    drawn = a.remaining;
  }
  line.HorizontalTo(frame.X(static_cast<double>(frame.time.end_ms)));

  const double capacity_y = frame.Y(static_cast<double>(run.limit.capacity()));
  if (const BucketArea area = BucketAreaOf(run.limit.algorithm()); area.colour != nullptr) {
    SvgPath fill = line;
    fill.VerticalTo(area.below_line ? frame.Y(0) : capacity_y)
        .HorizontalTo(frame.X(static_cast<double>(run.allowance.front().t_ms)))
        .Close();
    svg.Element(
        "path",
        {{"class", "bucket"}, {"d", fill.data()}, {"fill", area.colour}, {"fill-opacity", 0.18}});
  }
  svg.Element("line", {{"class", "capacity"},
                       {"x1", kLeft},
                       {"y1", capacity_y},
                       {"x2", kLeft + kPlotWidth},
                       {"y2", capacity_y},
                       {"stroke", kCapacityColour},
                       {"stroke-dasharray", "6 3"}});
  svg.Element("path", {{"class", "remaining"},
                       {"d", line.data()},
                       {"stroke", kRemainingColour},
                       {"stroke-width", 1.8},
                       {"fill", "none"}});
}

void DrawPanel(SvgWriter& svg, const Frame& frame, const Simulation& run, double top) {
  svg.Open("g", {{"class", "panel"},
                 {"data-algorithm", AlgorithmName(run.limit.algorithm())},
                 {"transform", "translate(0 " + FormatSvgNumber(top) + ")"}});
  svg.Text("text",
           {{"class", "panel-title"},
            {"x", kLeft},
            {"y", 16},
            {"font-size", 14},
            {"font-weight", "bold"}},
           PanelTitle(run));
  svg.Text("text", {{"x", kLeft + kPlotWidth}, {"y", 16}, {"text-anchor", "end"}}, Counts(run));
  svg.Text("text", {{"x", kLeft}, {"y", 34}, {"font-size", 11}, {"fill", kMutedColour}},
           Caption(frame, run));

  if (DrawsWindows(frame, run.limit)) DrawWindows(svg, frame, run.limit);
  if (DrawsSpan(run.limit)) DrawSpan(svg, frame, run);
  const auto draw_box = [&](double y, double height) {
    svg.Element("rect", {{"x", kLeft},
                         {"y", y},
                         {"width", kPlotWidth},
                         {"height", height},
                         {"fill", "none"},
                         {"stroke", kFrameColour}});
  };
  draw_box(frame.BandTop(), frame.band_height);
  draw_box(frame.PlotTop(), kAllowanceHeight);
  DrawUnitsAxis(svg, frame);
  DrawAllowance(svg, frame, run);
  DrawTimeAxis(svg, frame);
  DrawMarks(svg, frame, run, StackLevels(MarkExtents(frame, run)));
  svg.Close();
}

// One legend entry: its swatch drawn at (x, baseline), then its words.
struct LegendEntry {
  std::function<void(SvgWriter&, double, double)> swatch;
  std::string words;
};

std::vector<LegendEntry> LegendEntries(std::span<const Simulation> runs) {
  std::vector<LegendEntry> entries;
  entries.push_back({[](SvgWriter& svg, double x, double y) {
                       DrawDot(svg, x + 8, y - 4, kAdmittedColour, "legend", "");
                     },
                     "admitted"});
  entries.push_back(
      {[](SvgWriter& svg, double x, double y) { DrawCross(svg, x + 8, y - 4, "legend", ""); },
       "denied"});
  const bool shaping = std::any_of(runs.begin(), runs.end(),
                                   [](const Simulation& run) { return run.max_wait.count() > 0; });
  if (shaping) {
    entries.push_back(
        {[](SvgWriter& svg, double x, double y) {
           svg.Element("path", {{"d", SvgPath().MoveTo(x + 4, y - 4).HorizontalTo(x + 18).data()},
                                {"stroke", kBookedColour},
                                {"stroke-width", 1.2}});
           DrawDot(svg, x + 4, y - 4, kBookedColour, "legend", "");
         },
         "booked, waiting until the line's end"});
  }
  entries.push_back({[](SvgWriter& svg, double x, double y) {
                       svg.Element("path",
                                   {{"d", SvgPath().MoveTo(x, y - 4).HorizontalTo(x + 18).data()},
                                    {"stroke", kRemainingColour},
                                    {"stroke-width", 1.8}});
                     },
                     "remaining: what could be admitted now"});
  entries.push_back({[](SvgWriter& svg, double x, double y) {
                       svg.Element("path",
                                   {{"d", SvgPath().MoveTo(x, y - 4).HorizontalTo(x + 18).data()},
                                    {"stroke", kCapacityColour},
                                    {"stroke-dasharray", "6 3"}});
                     },
                     "capacity"});
  entries.push_back({nullptr, "requests at one time stack up"});
  return entries;
}

struct PlacedEntry {
  LegendEntry entry;
  double x = 0, baseline = 0;
};

// The legend in rows under the headline, left to right.
std::vector<PlacedEntry> PlaceLegend(std::span<const Simulation> runs) {
  constexpr double kSpacing = 18;
  std::vector<PlacedEntry> placed;
  double x = kLeft, baseline = kHeadlineBaseline + 24;
  for (LegendEntry& entry : LegendEntries(runs)) {
    const double width = (entry.swatch ? kLegendSwatch : 0) + kCharWidth * entry.words.size();
    if (x > kLeft && x + width > kLeft + kPlotWidth) {
      x = kLeft;
      baseline += kLegendRowHeight;
    }
    placed.push_back({std::move(entry), x, baseline});
    x += width + kSpacing;
  }
  return placed;
}

void DrawLegend(SvgWriter& svg, const std::vector<PlacedEntry>& placed) {
  svg.Open("g", {{"class", "legend"}});
  for (const auto& [entry, x, baseline] : placed) {
    double words_x = x;
    if (entry.swatch) {
      entry.swatch(svg, x, baseline);
      words_x += kLegendSwatch;
    }
    svg.Text("text", {{"x", words_x}, {"y", baseline}}, entry.words);
  }
  svg.Close();
}

}  // namespace

std::vector<int64_t> AllowanceSampleTimes(const Trace& trace, Duration max_wait) {
  std::vector<int64_t> request_times;
  for (const TraceRequest& request : trace.requests) request_times.push_back(request.t_ms);
  const TimeAxis axis = TimeAxisFor(request_times, max_wait);
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(axis.end_ms / (kPlotWidth / 2)));
  std::vector<int64_t> times;
  for (int64_t t = 0; t < axis.end_ms; t += step) times.push_back(t);
  times.push_back(axis.end_ms);
  return times;
}

std::string DrawPicture(std::span<const Simulation> runs, std::string_view title) {
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

  const std::vector<PlacedEntry> legend = PlaceLegend(runs);
  const double panels_top = legend.back().baseline + 16;
  const double height =
      panels_top + static_cast<double>(runs.size()) * (frame.PanelHeight() + kPanelGap);
  SvgWriter svg(kWidth, height, kFont, 12);
  svg.Text("title", {}, title);
  svg.Element("rect", {{"width", kWidth}, {"height", height}, {"fill", "#ffffff"}});
  svg.Text("text",
           {{"class", "headline"},
            {"x", kLeft},
            {"y", kHeadlineBaseline},
            {"font-size", 17},
            {"font-weight", "bold"}},
           title);
  DrawLegend(svg, legend);
  double top = panels_top;
  for (const Simulation& run : runs) {
    DrawPanel(svg, frame, run, top);
    top += frame.PanelHeight() + kPanelGap;
  }
  return svg.Finish();
}

}  // namespace sluice::cli
