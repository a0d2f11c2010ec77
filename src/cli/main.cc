// The `sluice` command: `sluice simulate` runs a limit over a trace (and draws it with --svg),
// `sluice bench` measures a store, `sluice serve` answers checks over HTTP.
#include <CLI/CLI.hpp>

#include "cli/bench.h"
#include "cli/serve.h"
#include "cli/simulate_command.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  CLI::App app{"sluice: distributed rate limiting"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sluice ") + sluice::cli::kVersion + " (git " +
                                        sluice::cli::kGitCommit + ")");

  sluice::cli::SimulateFlags simulate_flags;
  auto* simulate = sluice::cli::AddSimulateCommand(app, simulate_flags);

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
  if (simulate->parsed()) return sluice::cli::RunSimulate(simulate_flags);
  return 2;  // require_subcommand(1) leaves no other case
}
