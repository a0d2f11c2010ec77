#include "cli/simulate.h"

#include <charconv>
#include <istream>
#include <ostream>
#include <sstream>
#include <string>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"

namespace sluice::cli {
namespace {

struct TraceLine {
  int64_t t_ms = 0;
  int64_t cost = 1;
};

bool ParseInt(const std::string& word, int64_t& value) {
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  return ec == std::errc() && end == word.data() + word.size();
}

Result<TraceLine> ParseTraceLine(const std::string& line) {
  std::istringstream words(line);
  std::string t, cost, extra;
  words >> t >> cost >> extra;
  TraceLine parsed;
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

int64_t Millis(Duration d) { return (d.count() + 999) / 1000; }  // rounded up: never too early

}  // namespace

int Simulate(const Limit& limit, std::istream& trace, std::ostream& out, std::ostream& err,
             Duration max_wait) {
  ManualClock clock(Time(Duration(0)));
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  Limiter limiter(store, "simulate", limit);
  const bool shaping = max_wait.count() > 0;
  if (shaping && !CanReserve(limit.algorithm())) {
    err << "--max-wait needs token_bucket, leaky_bucket or gcra, not "
        << AlgorithmName(limit.algorithm()) << "\n";
    return 2;
  }
  if (max_wait.count() < 0 || max_wait > MaxDelayOf(limit)) {
    err << "--max-wait must be between 0 and " << MaxDelayOf(limit).count()
        << "us for this limit\n";
    return 2;
  }

  out << "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms" << (shaping ? ",delay_ms" : "")
      << "\n";
  std::string line;
  int64_t previous_ms = 0;
  for (int number = 1; std::getline(trace, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto fail = [&](const std::string& why) {
      err << "trace line " << number << ": " << why << "\n";
      return 2;
    };
    auto parsed = ParseTraceLine(line);
    if (!parsed.ok()) return fail(parsed.status().message());
    if (parsed->t_ms < previous_ms) {
      return fail("time " + std::to_string(parsed->t_ms) + " goes back before " +
                  std::to_string(previous_ms));
    }
    previous_ms = parsed->t_ms;
    clock.Set(Time(std::chrono::milliseconds(parsed->t_ms)));
    auto decision = limiter.Reserve("key", parsed->cost, max_wait);
    if (!decision.ok()) return fail(decision.status().message());
    out << parsed->t_ms << ',' << parsed->cost << ',' << (decision->allowed ? "true" : "false")
        << ',' << decision->remaining << ',' << Millis(decision->retry_after) << ','
        << Millis(decision->reset_after);
    if (shaping) out << ',' << Millis(decision->delay);
    out << '\n';
  }
  return 0;
}

}  // namespace sluice::cli
