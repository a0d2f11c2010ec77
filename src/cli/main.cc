// The `sluice` command: `sluice simulate` runs a limit over a trace.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "cli/bench.h"
#include "cli/duration.h"
#include "cli/serve.h"
#include "cli/simulate.h"
#include "cli/version.h"
#include "sluice/limit.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "sluice: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice: distributed rate limiting"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sluice ") + sluice::cli::kVersion + " (git " +
                                        sluice::cli::kGitCommit + ")");

  std::string algorithm = "gcra", period = "1s", max_wait = "0s", trace_path;
  int64_t count = 0;
  std::optional<int64_t> burst;
  auto* simulate = app.add_subcommand("simulate", "Run one limit over a trace and print CSV");
  simulate
      ->add_option("--algorithm", algorithm,
                   "fixed_window, sliding_log, sliding_window, "
                   "token_bucket, leaky_bucket or gcra")
      ->capture_default_str();
  simulate->add_option("--limit", count, "Requests per period")->required();
  simulate->add_option("--period", period, "Period: 500ms, 10s, 1m, 1h")->capture_default_str();
  simulate->add_option("--burst", burst, "Capacity of token_bucket, leaky_bucket and gcra");
  simulate->add_option("--trace", trace_path, "Trace file, '-' for stdin: lines 'T_MS [COST]'")
      ->required();
  simulate
      ->add_option("--max-wait", max_wait,
                   "Shape instead of police: book slots up to this far ahead "
                   "(token_bucket, leaky_bucket, gcra); adds a delay_ms column")
      ->capture_default_str();

  sluice::cli::BenchFlags bench_flags;
  auto* bench = sluice::cli::AddBenchCommand(app, bench_flags);

  sluice::cli::ServeFlags serve_flags;
  auto* serve = sluice::cli::AddServeCommand(app, serve_flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (serve->parsed()) return sluice::cli::RunServe(serve_flags);
  if (bench->parsed()) return sluice::cli::RunBench(bench_flags);

  auto parsed_algorithm = sluice::ParseAlgorithm(algorithm);
  if (!parsed_algorithm.ok()) return Fail("--algorithm: " + parsed_algorithm.status().message());
  auto parsed_period = sluice::cli::ParseDuration(period);
  if (!parsed_period.ok()) return Fail("--period: " + parsed_period.status().message());
  auto limit = sluice::Limit::Create(*parsed_algorithm, count, *parsed_period, burst);
  if (!limit.ok()) return Fail(limit.status().message());
  auto parsed_max_wait = sluice::cli::ParseDuration(max_wait);
  if (!parsed_max_wait.ok()) return Fail("--max-wait: " + parsed_max_wait.status().message());

  if (trace_path == "-") {
    return sluice::cli::Simulate(*limit, std::cin, std::cout, std::cerr, *parsed_max_wait);
  }
  std::ifstream trace(trace_path);
  if (!trace) return Fail("cannot open trace file '" + trace_path + "'");
  return sluice::cli::Simulate(*limit, trace, std::cout, std::cerr, *parsed_max_wait);
}
