// `sluice serve`: the standalone decision service. Loads a YAML rule set (config/config.h), opens
// the store and serves the HTTP API (http/api.h) until SIGTERM or SIGINT, then drains; SIGHUP
// reloads the rules from the same file, atomically, keeping the old ones if the new file is bad
// (cli/signals.h: SIGHUPs that come during a reload are one more reload, and a signal that comes
// while the service starts is taken once it serves).
// With an `rls` section it is also Envoy's rate limit service (rls/front_end.h): gRPC beside HTTP,
// POST /json, its directory reloaded on SIGHUP too (its options apply on restart).
// `sluice serve --check-config FILE` only validates FILE, as a service manager runs it before a
// start.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sluice::cli {

struct ServeFlags {
  std::string config_path;        // empty: the built-in examples/sluice.yaml
  std::string listen;             // HOST:PORT; empty: the config's
  std::string store_url;          // empty: the config's
  int io_threads = 0;             // 0: the config's
  std::string check_config_path;  // set: validate this file, serve nothing
};

// Adds the `serve` subcommand, filling `flags` when parsed.
CLI::App* AddServeCommand(CLI::App& app, ServeFlags& flags);

// Returns the process exit status: 0 after a graceful stop (or a valid --check-config file), 2 for
// a bad configuration or flag, 1 when the service cannot start (e.g. the address is in use).
int RunServe(const ServeFlags& flags);

}  // namespace sluice::cli
