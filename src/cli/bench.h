// `sluice bench`: a closed-loop load on a store, `concurrency` checks always in flight on keys
// "<key-prefix><i>" for i uniform in [0, keys) — the same names in every process, so several
// bench processes can load the same keys together. Prints decisions/s and latency percentiles,
// or one JSON object with --json.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sluice::cli {

struct BenchFlags {
  std::string store_url = "memory://";
  std::string algorithm = "gcra";
  int64_t keys = 10'000;
  int concurrency = 32;
  std::string duration = "5s";
  int64_t limit = 1'000'000;
  std::string period = "1s";
  int64_t burst = 0;  // 0: the algorithm's default
  std::string key_prefix = "bench:";
  int io_threads = 1;
  int connections = 2;
  size_t coalesce_max = 64;
  // Through a ResilientStore: its hot-key cache answers keys known to be over their limit.
  bool resilient = false;
  bool json = false;
  // Set: load the rate limit service at this HOST:PORT over gRPC instead of a store, each
  // ShouldRateLimit with `rls_descriptors` descriptors ("user", "<key-prefix><i>") in
  // `rls_domain`.
  std::string rls;
  std::string rls_domain = "bench";
  int rls_descriptors = 1;
};

CLI::App* AddBenchCommand(CLI::App& app, BenchFlags& flags);

// The exit status: 0, or 2 after printing a bad flag.
int RunBench(const BenchFlags& flags);

}  // namespace sluice::cli
