// `sluice simulate`: runs one limit over a trace of requests on a manual clock and prints each
// decision as CSV, to show how the algorithms differ on the same traffic.
//
// Trace: one request per line, "T_MS [COST]" (milliseconds from 0, non-decreasing; cost 1 by
// default). Blank lines and lines starting with '#' are skipped. Output: the header
// t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms and one row per request.
#pragma once

#include <iosfwd>

#include "sluice/limit.h"

namespace sluice::cli {

// Returns the process exit code: 0, or 2 after printing to `err` an error naming the bad line.
int Simulate(const Limit& limit, std::istream& trace, std::ostream& out, std::ostream& err);

}  // namespace sluice::cli
