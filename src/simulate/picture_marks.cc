#include "simulate/picture_marks.h"

#include "config/duration.h"

namespace sluice::simulate::picture {
namespace {

constexpr const char* kDeniedColour = "#c62828";

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

}  // namespace

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

}  // namespace sluice::simulate::picture
