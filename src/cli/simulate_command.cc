#include "cli/simulate_command.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "config/duration.h"
#include "simulate/simulate.h"
#include "sluice/limit.h"

namespace sluice::cli {
namespace {

int Fail(const std::string& message) {
  std::cerr << "sluice: " << message << "\n";
  return 2;
}

}  // namespace

CLI::App* AddSimulateCommand(CLI::App& app, SimulateFlags& flags) {
  auto* simulate = app.add_subcommand(
      "simulate", "Run one limit over a trace and print CSV, or draw it as an SVG picture");
  auto* algorithm = simulate
                        ->add_option("--algorithm", flags.algorithm,
                                     "fixed_window, sliding_log, sliding_window, "
                                     "token_bucket, leaky_bucket or gcra")
                        ->capture_default_str();
  simulate->add_option("--limit", flags.count, "Requests per period")->required();
  simulate->add_option("--period", flags.period, "Period: 500ms, 10s, 1m, 1h")
      ->capture_default_str();
  simulate->add_option("--burst", flags.burst, "Capacity of token_bucket, leaky_bucket and gcra");
  simulate
      ->add_option("--trace", flags.trace_path, "Trace file, '-' for stdin: lines 'T_MS [COST]'")
      ->required();
  auto* max_wait = simulate
                       ->add_option("--max-wait", flags.max_wait,
                                    "Shape instead of police: book slots up to this far ahead "
                                    "(token_bucket, leaky_bucket, gcra); adds a delay_ms column")
                       ->capture_default_str();
  auto* svg = simulate
                  ->add_option("--svg", flags.svg_path,
                               "Draw the run as an SVG picture into this file ('-' for stdout) "
                               "instead of printing CSV")
                  ->check([](const std::string& path) {
                    return path.empty() ? "expected a file name, or '-' for stdout" : "";
                  });
  simulate
      ->add_flag("--compare", flags.compare,
                 "With --svg: run all six algorithms over the trace, one panel each on the same "
                 "axes (--burst applies to the bucket algorithms)")
      ->needs(svg)
      ->excludes(algorithm)
      ->excludes(max_wait);
  simulate->add_option("--title", flags.title, "With --svg: the picture's headline")->needs(svg);
  return simulate;
}

int RunSimulate(const SimulateFlags& flags) {
  std::vector<Algorithm> algorithms(std::begin(kAllAlgorithms), std::end(kAllAlgorithms));
  if (!flags.compare) {
    auto algorithm = ParseAlgorithm(flags.algorithm);
    if (!algorithm.ok()) return Fail("--algorithm: " + algorithm.status().message());
    algorithms = {*algorithm};
  }
  auto period = config::ParseDuration(flags.period);
  if (!period.ok()) return Fail("--period: " + period.status().message());
  std::vector<Limit> limits;
  for (const Algorithm a : algorithms) {
    // With --compare, --burst is for the algorithms that have one.
    const bool with_burst = !flags.compare || IsMeter(a);
    auto limit = Limit::Create(a, flags.count, *period, with_burst ? flags.burst : std::nullopt);
    if (!limit.ok()) {
      return Fail((flags.compare ? std::string(AlgorithmName(a)) + ": " : "") +
                  limit.status().message());
    }
    limits.push_back(*limit);
  }
  auto max_wait = config::ParseDuration(flags.max_wait);
  if (!max_wait.ok()) return Fail("--max-wait: " + max_wait.status().message());

  std::ifstream trace_file;
  if (flags.trace_path != "-") {
    trace_file.open(flags.trace_path);
    if (!trace_file) return Fail("cannot open trace file '" + flags.trace_path + "'");
  }
  std::istream& trace = flags.trace_path == "-" ? std::cin : trace_file;
  if (flags.svg_path.empty()) {
    return simulate::Simulate(limits.front(), trace, std::cout, std::cerr, *max_wait);
  }

  const std::string title = !flags.title.empty()      ? flags.title
                            : flags.trace_path == "-" ? "Trace from stdin"
                                                      : "Trace " + flags.trace_path;
  std::string svg;
  if (const int code = simulate::SimulatePicture(limits, trace, title, svg, std::cerr, *max_wait)) {
    return code;
  }
  if (flags.svg_path == "-") {
    std::cout << svg;
    return 0;
  }
  std::ofstream out(flags.svg_path, std::ios::binary);
  if (!(out << svg) || !out.flush()) return Fail("cannot write SVG file '" + flags.svg_path + "'");
  return 0;
}

}  // namespace sluice::cli
