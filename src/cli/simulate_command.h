// The `sluice simulate` command line: its flags, and turning them into limits, a trace and either
// CSV on stdout or an SVG picture (--svg FILE, or all six algorithms with --compare). The work is
// simulate.h's.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace sluice::cli {

struct SimulateFlags {
  std::string algorithm = "gcra";
  int64_t count = 0;
  std::string period = "1s";
  std::optional<int64_t> burst;
  std::string trace_path;  // '-': stdin
  std::string max_wait = "0s";
  std::string svg_path;  // empty: CSV; '-': the SVG to stdout
  bool compare = false;
  std::string title;  // empty: named after the trace
};

// Adds the `simulate` subcommand, filling `flags` when parsed.
CLI::App* AddSimulateCommand(CLI::App& app, SimulateFlags& flags);

// The exit status: 0, or 2 after printing a bad flag, a bad trace line or a file that cannot be
// read or written.
int RunSimulate(const SimulateFlags& flags);

}  // namespace sluice::cli
