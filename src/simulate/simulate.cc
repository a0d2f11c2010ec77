#include "simulate/simulate.h"

#include <charconv>
#include <istream>
#include <ostream>
#include <sstream>
#include <string>

#include "config/duration.h"
#include "simulate/picture.h"
#include "sluice/limiter.h"
#include "sluice/memory_store.h"

namespace sluice::simulate {
namespace {

bool ParseInt(const std::string& word, int64_t& value) {
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  return ec == std::errc() && end == word.data() + word.size();
}

Result<TraceRequest> ParseTraceLine(const std::string& line) {
  std::istringstream words(line);
  std::string t, cost, extra;
  words >> t >> cost >> extra;
  TraceRequest parsed;
  if (!ParseInt(t, parsed.t_ms) || parsed.t_ms < 0) {
    return Status::InvalidArgument("expected a time in milliseconds (a whole number >= 0), got '" +
                                   t + "'");
  }
  if (!cost.empty() && (!ParseInt(cost, parsed.cost) || parsed.cost < 0)) {
    return Status::InvalidArgument("expected a cost (a whole number >= 0), got '" + cost + "'");
  }
  if (!extra.empty()) return Status::InvalidArgument("unexpected '" + extra + "' after the cost");
  return parsed;
}

std::string LineError(int line, const std::string& why) {
  return "trace line " + std::to_string(line) + ": " + why;
}

// Empty when `max_wait` suits `limit`.
std::string MaxWaitError(const Limit& limit, Duration max_wait) {
  if (max_wait.count() > 0 && !IsMeter(limit.algorithm())) {
    return "--max-wait needs token_bucket, leaky_bucket or gcra, not " +
           std::string(AlgorithmName(limit.algorithm()));
  }
  if (max_wait.count() < 0 || max_wait > MaxDelayOf(limit)) {
    return "--max-wait must be between 0 and " + std::to_string(MaxDelayOf(limit).count()) +
           "us for this limit";
  }
  return "";
}

}  // namespace

Trace ReadTrace(std::istream& in) {
  Trace trace;
  std::string line;
  int64_t previous_ms = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    auto parsed = ParseTraceLine(line);
    if (!parsed.ok()) {
      trace.error = LineError(number, parsed.status().message());
      break;
    }
    if (parsed->t_ms < previous_ms) {
      trace.error = LineError(number, "time " + std::to_string(parsed->t_ms) +
                                          " goes back before " + std::to_string(previous_ms));
      break;
    }
    previous_ms = parsed->t_ms;
    parsed->line = number;
    trace.requests.push_back(*parsed);
  }
  return trace;
}

Simulation RunSimulation(const Limit& limit, const Trace& trace, Duration max_wait,
                         std::span<const int64_t> peek_times_ms) {
  ManualClock clock(Time(Duration(0)));
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  Limiter limiter(store, "simulate", limit);
  Simulation run{
      .limit = limit, .max_wait = max_wait, .requests = {}, .allowance = {}, .error = {}};
  const auto set_clock = [&](int64_t t_ms) { clock.Set(Time(std::chrono::milliseconds(t_ms))); };
  auto peek = peek_times_ms.begin();
  const auto peek_until = [&](int64_t t_ms) {
    for (; peek != peek_times_ms.end() && *peek <= t_ms; ++peek) {
      set_clock(*peek);
      auto decision = limiter.Check("key", 0);
      if (decision.ok()) run.allowance.push_back({*peek, decision->remaining});
    }
  };
  for (const TraceRequest& request : trace.requests) {
    peek_until(request.t_ms);
    set_clock(request.t_ms);
    auto decision = limiter.Reserve("key", request.cost, max_wait);
    if (!decision.ok()) {
      run.error = LineError(request.line, decision.status().message());
      return run;
    }
    run.requests.push_back({request.t_ms, request.cost, *decision});
    run.allowance.push_back({request.t_ms, decision->remaining});
  }
  peek_until(peek_times_ms.empty() ? 0 : peek_times_ms.back());
  run.error = trace.error;
  return run;
}

int Simulate(const Limit& limit, std::istream& trace, std::ostream& out, std::ostream& err,
             Duration max_wait) {
  if (const std::string error = MaxWaitError(limit, max_wait); !error.empty()) {
    err << error << "\n";
    return 2;
  }
  const bool shaping = max_wait.count() > 0;
  const Simulation run = RunSimulation(limit, ReadTrace(trace), max_wait);
  out << "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms" << (shaping ? ",delay_ms" : "")
      << "\n";
  for (const SimulatedRequest& request : run.requests) {
    const Decision& decision = request.decision;
    out << request.t_ms << ',' << request.cost << ',' << (decision.allowed ? "true" : "false")
        << ',' << decision.remaining << ',' << config::CeilMillis(decision.retry_after) << ','
        << config::CeilMillis(decision.reset_after);
    if (shaping) out << ',' << config::CeilMillis(decision.delay);
    out << '\n';
  }
  if (run.error.empty()) return 0;
  err << run.error << "\n";
  return 2;
}

int SimulatePicture(std::span<const Limit> limits, std::istream& trace_in, std::string_view title,
                    std::string& svg, std::ostream& err, Duration max_wait) {
  svg.clear();
  for (const Limit& limit : limits) {
    if (const std::string error = MaxWaitError(limit, max_wait); !error.empty()) {
      err << error << "\n";
      return 2;
    }
  }
  const Trace trace = ReadTrace(trace_in);
  if (!trace.error.empty()) {
    err << trace.error << "\n";
    return 2;
  }
  const std::vector<int64_t> peek_times = AllowanceSampleTimes(trace, max_wait);
  std::vector<Simulation> runs;
  for (const Limit& limit : limits) {
    runs.push_back(RunSimulation(limit, trace, max_wait, peek_times));
    if (!runs.back().error.empty()) {
      err << runs.back().error << "\n";
      return 2;
    }
  }
  svg = DrawPicture(runs, title);
  return 0;
}

}  // namespace sluice::simulate
