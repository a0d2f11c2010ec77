#include "simulate/picture_legend.h"

#include <algorithm>
#include <utility>

#include "simulate/picture_frame.h"
#include "simulate/picture_marks.h"

namespace sluice::simulate::picture {
namespace {

constexpr double kLegendRowHeight = 20;
constexpr double kLegendSwatch = 24;  // width of an entry's sample
constexpr double kCharWidth = 6.6;    // a 12 px character, generously, to lay out the legend

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

}  // namespace

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

}  // namespace sluice::simulate::picture
