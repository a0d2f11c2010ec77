#include "simulate/picture.h"

#include <algorithm>

#include "config/duration.h"
#include "simulate/picture_background.h"
#include "simulate/picture_frame.h"
#include "simulate/picture_legend.h"
#include "simulate/picture_marks.h"
#include "simulate/svg.h"

namespace sluice::simulate {
namespace {

using namespace picture;

constexpr double kPanelGap = 16;
constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr const char* kFrameColour = "#b0bec5";
constexpr const char* kGridColour = "#eceff1";
constexpr const char* kMutedColour = "#455a64";

std::string TimeLabel(int64_t t_ms, bool seconds) {
  return seconds ? FormatSvgNumber(static_cast<double>(t_ms) / 1000) : std::to_string(t_ms);
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

  DrawBackground(svg, frame, run);
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
  const Frame frame = LayOutFrame(runs);

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

}  // namespace sluice::simulate
