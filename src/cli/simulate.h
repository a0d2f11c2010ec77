// `sluice simulate`: runs one limit over a trace of requests on a manual clock and prints each
// decision as CSV, to show how the algorithms differ on the same traffic.
//
// Trace: one request per line, "T_MS [COST]" (milliseconds from 0, non-decreasing; cost 1 by
// default). Blank lines and lines starting with '#' are skipped. Output: the header
// t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms and one row per request.
//
// With a max_wait (shaping; token_bucket, leaky_bucket and gcra only), each request may book a
// slot up to max_wait ahead instead of being refused (Limiter::Reserve), and a delay_ms column
// says how long an admitted request waits for its slot.
#pragma once

#include <iosfwd>

#include "sluice/clock.h"
#include "sluice/limit.h"

namespace sluice::cli {

// Returns the process exit code: 0, or 2 after printing to `err` an error naming the bad line
// (or the bad max_wait).
int Simulate(const Limit& limit, std::istream& trace, std::ostream& out, std::ostream& err,
             Duration max_wait = Duration(0));

}  // namespace sluice::cli
