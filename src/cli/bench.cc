#include "cli/bench.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <latch>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "cli/bench_load.h"
#include "cli/timer_thread.h"
#include "config/duration.h"
#include "redis/url.h"
#include "sluice/leasing_store.h"
#include "sluice/limiter.h"
#include "sluice/open_store.h"
#include "sluice/resilient_store.h"

namespace sluice::cli {
namespace {

// `concurrency` chains of asynchronous checks: each completion starts the next, until the end.
// A completion that runs inline (a refusal while Redis is down) is continued by a loop rather
// than by recursion, so the stack stays flat.
void RunAsyncChains(Limiter& limiter, const BenchFlags& flags, Steady::time_point end,
                    Tally& tally) {
  struct Chain {
    explicit Chain(KeyPicker picker) : keys(std::move(picker)) {}
    KeyPicker keys;
    std::atomic<int> phase{0};  // 0 in flight, 1 completed, 2 the caller has left
  };
  std::latch running(flags.concurrency);
  std::vector<std::unique_ptr<Chain>> chains;
  for (int c = 0; c < flags.concurrency; ++c) {
    chains.push_back(std::make_unique<Chain>(KeyPicker(flags, c)));
  }
  std::function<void(Chain&)> drive = [&](Chain& chain) {
    while (Steady::now() < end) {
      chain.phase.store(0);
      const auto start = Steady::now();
      limiter.CheckAsync(chain.keys.Next(), 1, [&, start](Result<Decision> d) {
        tally.Add(d, start);
        if (chain.phase.exchange(1) == 2) drive(chain);
      });
      if (chain.phase.exchange(2) != 1) return;  // the callback will continue the chain
    }
    running.count_down();
  };
  for (auto& chain : chains) drive(*chain);
  running.wait();
}

// One synchronous loop per thread: for an in-process store, which decides inline, and for
// leases, whose inline answers would otherwise keep a chain spinning on an I/O thread.
void RunThreads(Limiter& limiter, const BenchFlags& flags, int threads, Steady::time_point end,
                Tally& tally) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      KeyPicker keys(flags, t);
      while (Steady::now() < end) {
        const auto start = Steady::now();
        tally.Add(limiter.Check(keys.Next()), start);
      }
    });
  }
  for (auto& w : workers) w.join();
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "sluice bench: %s\n", message.c_str());
  return 2;
}

double UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// What a run measured, printed by Report.
struct Outcome {
  const Tally& tally;
  double seconds;  // from the start until every check was decided
  std::chrono::system_clock::time_point started, ended;
  uint64_t late;
  const ResilientStore* resilient;  // null: none
  const LeasingStore* leasing;      // null: no leases
};

void Report(const BenchFlags& f, const Limit& limit, const Outcome& run) {
  const Tally& tally = run.tally;
  const uint64_t decisions = tally.allowed + tally.denied + tally.errors;
  const double per_second = static_cast<double>(decisions) / run.seconds;
  const LatencyReport latency(tally.latency);
  const LeaseStats leases = run.leasing ? run.leasing->lease_stats() : LeaseStats{};
  if (f.json) {
    nlohmann::json report = {{"store", redis::RedactedUrl(f.store_url)},
                             {"algorithm", f.algorithm},
                             {"capacity", limit.capacity()},
                             {"keys", f.keys},
                             {"concurrency", f.concurrency},
                             {"rate", f.rate},
                             {"duration_s", run.seconds},
                             {"start_unix_s", UnixSeconds(run.started)},
                             {"end_unix_s", UnixSeconds(run.ended)},
                             {"decisions", decisions},
                             {"decisions_per_sec", per_second},
                             {"allowed", tally.allowed.load()},
                             {"denied", tally.denied.load()},
                             {"errors", tally.errors.load()},
                             {"late", run.late}};
    latency.AddTo(report);
    if (tally.errors.load() > 0) report["first_error"] = tally.FirstError();
    if (run.resilient) {
      const StoreHealthStats stats = run.resilient->stats();
      report["decided_by_store"] = stats.store;
      report["decided_by_hot_key_cache"] = stats.hot_key_cache;
      report["decided_by_policy"] = stats.fail_open + stats.fail_closed + stats.local_fallback;
    }
    if (run.leasing) {
      report["lease"] = {{"units", f.lease_units},
                         {"lifetime", f.lease_lifetime},
                         {"taken", leases.taken},
                         {"units_taken", leases.units_taken},
                         {"units_used", leases.units_used},
                         {"units_returned", leases.units_returned},
                         {"units_lapsed", leases.units_lapsed},
                         {"refusals", leases.refusals},
                         {"held", leases.held}};
    }
    std::printf("%s\n", report.dump().c_str());
    return;
  }
  std::printf(
      "%s %s, %lld keys, %d in flight, %.1f s: %.0f decisions/s; %s; allowed %llu, denied %llu, "
      "errors %llu",
      redis::RedactedUrl(f.store_url).c_str(), f.algorithm.c_str(), static_cast<long long>(f.keys),
      f.concurrency, run.seconds, per_second, latency.Text().c_str(),
      static_cast<unsigned long long>(tally.allowed.load()),
      static_cast<unsigned long long>(tally.denied.load()),
      static_cast<unsigned long long>(tally.errors.load()));
  if (tally.errors.load() > 0) std::printf(" (the first: %s)", tally.FirstError().c_str());
  if (f.rate > 0) {
    std::printf("; rate %.0f/s, late %llu", f.rate, static_cast<unsigned long long>(run.late));
  }
  if (run.leasing) {
    std::printf(
        "; leases of %lld: taken %llu, units taken %llu, used %llu, returned %llu, lapsed %llu; "
        "refusals %llu; held %llu",
        static_cast<long long>(f.lease_units), static_cast<unsigned long long>(leases.taken),
        static_cast<unsigned long long>(leases.units_taken),
        static_cast<unsigned long long>(leases.units_used),
        static_cast<unsigned long long>(leases.units_returned),
        static_cast<unsigned long long>(leases.units_lapsed),
        static_cast<unsigned long long>(leases.refusals),
        static_cast<unsigned long long>(leases.held));
  }
  std::printf("\n");
}

}  // namespace

CLI::App* AddBenchCommand(CLI::App& app, BenchFlags& f) {
  auto* bench =
      app.add_subcommand("bench", "Closed- or open-loop load on a store: decisions/s, latency");
  bench->option_defaults()->always_capture_default();
  bench->add_option("--store", f.store_url,
                    "memory://, redis[s]://HOST:PORT, unix:///PATH or "
                    "redis[s]+cluster://HOST:PORT,...");
  bench->add_option("--tls-ca-file", f.tls.ca_file,
                    "rediss: PEM authorities to verify Redis with (default: the system's)");
  bench->add_option("--tls-cert-file", f.tls.cert_file, "rediss: client certificate (PEM)");
  bench->add_option("--tls-key-file", f.tls.key_file, "rediss: the client certificate's key");
  bench->add_option("--tls-server-name", f.tls.server_name,
                    "rediss: the name verified (default: the URL's host)");
  bench->add_flag("--tls-insecure-skip-verify", f.tls.insecure_skip_verify,
                  "rediss: do not verify Redis's certificate (tests only)");
  bench->add_option("--algorithm", f.algorithm);
  bench->add_option("--keys", f.keys, "Distinct keys");
  bench->add_option("--concurrency", f.concurrency, "Checks in flight");
  bench->add_option("--duration", f.duration, "How long: 10s, 1m");
  bench->add_option("--limit", f.limit);
  bench->add_option("--period", f.period);
  bench->add_option("--burst", f.burst, "0: the algorithm's default");
  bench->add_option("--key-prefix", f.key_prefix);
  bench->add_option("--io-threads", f.io_threads, "Redis client I/O threads");
  bench->add_option("--connections", f.connections,
                    "Redis connections per I/O thread to each node (0: 2 to one Redis, 1 to each "
                    "Redis Cluster master)");
  bench->add_option("--coalesce-max", f.coalesce_max,
                    "Checks one Redis script call decides at most (1: one call per check)");
  bench->add_option("--rate", f.rate,
                    "Open loop: checks per second, paced evenly, at most --concurrency in flight "
                    "(0: closed loop)");
  bench->add_option("--lease-units", f.lease_units,
                    "Checks lease this many units at a time through a LeasingStore (0: no leases)");
  bench->add_option("--lease-lifetime", f.lease_lifetime, "How long a lease is held at most");
  bench->add_flag("--resilient", f.resilient,
                  "Through a ResilientStore (hot-key cache, breaker, failure policy)");
  bench->add_flag("--json", f.json, "Print one JSON object");
  bench->add_option("--rls", f.rls,
                    "HOST:PORT of a rate limit service (gRPC) to load instead of a store");
  bench->add_option("--rls-domain", f.rls_domain, "Its requests' domain");
  bench->add_option("--rls-descriptors", f.rls_descriptors, "Descriptors per request")
      ->check(CLI::Range(1, 64));
  return bench;
}

int RunBench(const BenchFlags& f) {
  auto algorithm = ParseAlgorithm(f.algorithm);
  if (!algorithm.ok()) return Fail(algorithm.status().message());
  auto duration = config::ParseDuration(f.duration);
  if (!duration.ok()) return Fail("--duration: " + duration.status().message());
  auto period = config::ParseDuration(f.period);
  if (!period.ok()) return Fail("--period: " + period.status().message());
  if (f.keys < 1 || f.concurrency < 1 || f.io_threads < 1 || f.connections < 0) {
    return Fail(
        "--keys, --concurrency and --io-threads must be at least 1, --connections at least 0");
  }
  if (!(f.rate >= 0)) return Fail("--rate must be 0 (closed loop) or above");
  if (!f.rls.empty()) {
    if (f.rate > 0 || f.lease_units != 0) {
      return Fail("--rate and --lease-units load a store, not --rls");
    }
    return RunRlsBench(f, *duration);
  }
  auto limit = Limit::Create(*algorithm, f.limit, *period,
                             f.burst > 0 ? std::optional(f.burst) : std::nullopt);
  if (!limit.ok()) return Fail(limit.status().message());
  LeaseTerms lease;
  if (f.lease_units != 0) {
    auto lifetime = config::ParseDuration(f.lease_lifetime);
    if (!lifetime.ok()) return Fail("--lease-lifetime: " + lifetime.status().message());
    lease = LeaseTerms{.units = f.lease_units, .lifetime = *lifetime};
    if (Status valid = ValidateLeaseTerms(*limit, lease); !valid.ok()) {
      return Fail("--lease-units, --lease-lifetime: " + valid.message());
    }
  }
  OpenStoreOptions store_options;
  store_options.tls = f.tls;
  store_options.io_threads = f.io_threads;
  store_options.connections_per_thread = f.connections;
  store_options.coalesce_max = f.coalesce_max;
  auto store = OpenStore(f.store_url, store_options);
  if (!store.ok()) return Fail(store.status().message());
  // Leases sit on the backend, under the resilient store: what it caches or decides by policy
  // never reaches them.
  std::unique_ptr<TimerThread> lease_timers;
  std::unique_ptr<LeasingStore> leasing;
  if (lease.units > 0) {
    lease_timers = std::make_unique<TimerThread>();
    leasing = std::make_unique<LeasingStore>(**store, lease_timers->timers());
  }
  Store& below = leasing ? static_cast<Store&>(*leasing) : **store;
  std::unique_ptr<ResilientStore> resilient;
  if (f.resilient) resilient = std::make_unique<ResilientStore>(below);
  Limiter limiter(resilient ? static_cast<Store&>(*resilient) : below, "bench", *limit,
                  FailurePolicy::kFailOpen, lease);

  Tally tally;
  uint64_t late = 0;
  const auto started = std::chrono::system_clock::now();
  const auto start = Steady::now();
  const auto end = start + *duration;
  if (f.rate > 0) {
    late = RunOpenLoop(limiter, f, start, end, tally);
  } else if ((*store)->DecidesInline()) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    RunThreads(limiter, f, std::max(1, std::min(f.concurrency, cores)), end, tally);
  } else if (leasing) {
    RunThreads(limiter, f, f.concurrency, end, tally);
  } else {
    RunAsyncChains(limiter, f, end, tally);
  }
  const double seconds = std::chrono::duration<double>(Steady::now() - start).count();
  Report(f, *limit,
         Outcome{.tally = tally,
                 .seconds = seconds,
                 .started = started,
                 .ended = std::chrono::system_clock::now(),
                 .late = late,
                 .resilient = resilient.get(),
                 .leasing = leasing.get()});
  return 0;
}

}  // namespace sluice::cli
