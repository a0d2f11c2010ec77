// `sluice bench`: a load on a store, on keys "<key-prefix><i>" for i uniform in [0, keys) — the
// same names in every process, so several bench processes can load the same keys together. Closed
// loop by default, `concurrency` checks always in flight; with a `rate`, open loop: that many
// checks per second whatever the answers, at most `concurrency` in flight. Checks may take leases
// (`lease_units`) through a LeasingStore. Prints decisions/s, latency percentiles, the counts of
// admissions and denials and the leases' stats, or one JSON object with --json.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "sluice/redis_tls.h"

namespace sluice::cli {

struct BenchFlags {
  std::string store_url = "memory://";
  RedisTlsOptions tls;  // for rediss:// and rediss+cluster://
  std::string algorithm = "gcra";
  int64_t keys = 10'000;
  int concurrency = 32;
  std::string duration = "5s";
  int64_t limit = 1'000'000;
  std::string period = "1s";
  int64_t burst = 0;  // 0: the algorithm's default
  std::string key_prefix = "bench:";
  int io_threads = 1;
  int connections = 0;  // 0: the store's default
  size_t coalesce_max = 64;
  // Above 0: checks per second from this process, paced evenly (open loop).
  double rate = 0;
  // Above 0: checks lease this many units at a time, each lease held at most `lease_lifetime`.
  int64_t lease_units = 0;
  std::string lease_lifetime = "100ms";
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
