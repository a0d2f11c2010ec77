// The requests of a panel of `sluice simulate`'s pictures, one mark each with its tooltip: a dot
// for an admitted request, an orange dot with a line to its slot for a booked one, a cross for a
// denied one.
//
// Thread safety: plain functions with no shared state.
#pragma once

#include <string>
#include <vector>

#include "simulate/picture_frame.h"
#include "simulate/simulate.h"
#include "simulate/svg.h"

namespace sluice::simulate::picture {

// A denied request: a cross. No tooltip when `tip` is empty.
void DrawCross(SvgWriter& svg, double x, double y, const char* css_class, const std::string& tip);
// An admitted request: a dot of `colour`.
void DrawDot(SvgWriter& svg, double x, double y, const char* colour, const char* css_class,
             const std::string& tip);

// Every request of `run`, each at the stack level `levels` gives it (StackLevels).
void DrawMarks(SvgWriter& svg, const Frame& frame, const Simulation& run,
               const std::vector<int>& levels);

}  // namespace sluice::simulate::picture
