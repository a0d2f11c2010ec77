// `sluice simulate`: runs one limit over a trace of requests on a manual clock and prints each
// decision as CSV, or draws the run as an SVG picture (several limits side by side with
// --compare), to show how the algorithms differ on the same traffic.
//
// Trace: one request per line, "T_MS [COST]" (milliseconds from 0, non-decreasing; cost 1 by
// default). Blank lines and lines starting with '#' are skipped. Output: the header
// t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms and one row per request.
//
// With a max_wait (shaping; token_bucket, leaky_bucket and gcra only), each request may book a
// slot up to max_wait ahead instead of being refused (Limiter::Reserve), and a delay_ms column
// says how long an admitted request waits for its slot.
//
// Thread safety: the functions share no state; each run has its own clock and store.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::simulate {

struct TraceRequest {
  int line = 0;  // in the trace file, for error messages
  int64_t t_ms = 0;
  int64_t cost = 1;
};

// A trace read up to its first bad line: `requests` holds the lines before it and `error` names
// it ("trace line N: why"), empty when every line was good.
struct Trace {
  std::vector<TraceRequest> requests;
  std::string error;
};

Trace ReadTrace(std::istream& in);

struct SimulatedRequest {
  int64_t t_ms = 0;
  int64_t cost = 1;
  Decision decision;
};

// What could be admitted at `t_ms`: after a request there, or by a peek (cost 0, which consumes
// nothing) before the requests of that instant.
struct Allowance {
  int64_t t_ms = 0;
  int64_t remaining = 0;
};

struct Simulation {
  Limit limit;
  Duration max_wait{0};
  // Decided in trace order, up to the first line that failed.
  std::vector<SimulatedRequest> requests;
  // After every request and at every peek time, in time order.
  std::vector<Allowance> allowance;
  // "trace line N: why" for the first line that could not be read or decided; empty otherwise.
  std::string error;
};

// Runs `limit` over `trace` from a fresh state at time 0, peeking at each of `peek_times_ms`
// (non-decreasing) on the way; the peeks change no decision.
Simulation RunSimulation(const Limit& limit, const Trace& trace, Duration max_wait = Duration(0),
                         std::span<const int64_t> peek_times_ms = {});

// Returns the process exit code: 0, or 2 after printing to `err` an error naming the bad line
// (or the bad max_wait).
int Simulate(const Limit& limit, std::istream& trace, std::ostream& out, std::ostream& err,
             Duration max_wait = Duration(0));

// Draws every limit's run over the trace, one panel each on the same axes, under `title`, into
// `svg`. Returns 0, or 2 after printing the first error to `err` (leaving `svg` empty).
int SimulatePicture(std::span<const Limit> limits, std::istream& trace, std::string_view title,
                    std::string& svg, std::ostream& err, Duration max_wait = Duration(0));

}  // namespace sluice::simulate
