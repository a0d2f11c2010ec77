// What `sluice bench`'s loads share: a latency histogram and its report, the keys they pick and
// the tally of their decisions.
// Thread safety: Histogram and Tally may be used from any thread; a KeyPicker by one thread at a
// time.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli/bench.h"
#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limiter.h"
#include "sluice/status.h"

namespace sluice::cli {

// Latencies in microseconds, log-linear: exact below 64 µs, then 32 buckets per power of two
// (≤ 3% error). Fixed size, lock-free.
class Histogram {
 public:
  void Record(int64_t us) { counts_[Bucket(std::max<int64_t>(us, 0))].fetch_add(1); }

  int64_t Percentile(double p) const {
    uint64_t total = 0;
    for (const auto& c : counts_) total += c.load();
    if (total == 0) return 0;
    const auto rank = static_cast<uint64_t>(p * static_cast<double>(total - 1)) + 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i].load();
      if (seen >= rank) return UpperBound(i);
    }
    return UpperBound(kBuckets - 1);
  }

 private:
  static constexpr int kSubBits = 5;  // 32 sub-buckets per power of two
  static constexpr size_t kLinear = 64;
  static constexpr size_t kBuckets = kLinear + 40 * (1 << kSubBits);

  static size_t Bucket(int64_t v) {
    const auto u = static_cast<uint64_t>(v);
    if (u < kLinear) return u;
    const int power = std::bit_width(u) - 1;  // >= 6
    const uint64_t sub = (u >> (power - kSubBits)) & ((1 << kSubBits) - 1);
    return std::min(kLinear + (power - 6) * (1 << kSubBits) + sub, kBuckets - 1);
  }
  static int64_t UpperBound(size_t bucket) {
    if (bucket < kLinear) return static_cast<int64_t>(bucket);
    const size_t power = (bucket - kLinear) / (1 << kSubBits) + 6;
    const size_t sub = (bucket - kLinear) % (1 << kSubBits);
    return static_cast<int64_t>(((uint64_t{1} << kSubBits | sub) + 1) << (power - kSubBits)) - 1;
  }

  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
};

// The percentiles a report gives of a histogram.
struct LatencyReport {
  explicit LatencyReport(const Histogram& h)
      : p50(h.Percentile(0.50)), p99(h.Percentile(0.99)), p999(h.Percentile(0.999)) {}

  void AddTo(nlohmann::json& report) const {
    report["p50_us"] = p50;
    report["p99_us"] = p99;
    report["p999_us"] = p999;
  }
  std::string Text() const {
    return "latency p50 " + std::to_string(p50) + " us, p99 " + std::to_string(p99) + " us, p999 " +
           std::to_string(p999) + " us";
  }

  int64_t p50, p99, p999;
};

// The keys "<key-prefix><i>", i uniform in [0, keys), one loop of a load picks: the same sequence
// in every process for the same loop.
class KeyPicker {
 public:
  KeyPicker(const BenchFlags& flags, int loop)
      : prefix_(flags.key_prefix),
        keys_(static_cast<uint64_t>(flags.keys)),
        rng_(static_cast<uint64_t>(loop) + 1) {}
  const std::string& Next() {
    key_.assign(prefix_);
    key_.append(std::to_string(rng_() % keys_));
    return key_;
  }

 private:
  std::string prefix_, key_;
  uint64_t keys_;
  std::mt19937_64 rng_;
};

using Steady = std::chrono::steady_clock;

// A store's decisions and their latencies.
struct Tally {
  std::atomic<uint64_t> allowed{0}, denied{0}, errors{0};
  Histogram latency;
  // The first error's message, for the report.
  std::string FirstError() const {
    std::lock_guard lock(first_error_mu);
    return first_error;
  }
  mutable std::mutex first_error_mu;
  std::string first_error;
  // `start`: when the check started, or (open loop) was due to.
  void Add(const Result<Decision>& d, Steady::time_point start) {
    latency.Record(
        std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - start).count());
    if (!d.ok()) {
      if (errors.fetch_add(1, std::memory_order_relaxed) == 0) {
        std::lock_guard lock(first_error_mu);
        first_error = d.status().ToString();
      }
    } else if (d->allowed) {
      allowed.fetch_add(1, std::memory_order_relaxed);
    } else {
      denied.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

// The open loop (cli/bench_open_loop.cc): from `start` until `end`, flags.rate checks per second,
// the i-th due at start + i / rate, at most flags.concurrency in flight. A check due while that
// many are in flight starts when one completes: it is late. Returns when every check started has
// been decided, with the number of late ones. Latency counts from when a check was due.
uint64_t RunOpenLoop(Limiter& limiter, const BenchFlags& flags, Steady::time_point start,
                     Steady::time_point end, Tally& tally);

// `sluice bench --rls HOST:PORT`: the load on a rate limit service over gRPC (cli/bench_rls.cc).
int RunRlsBench(const BenchFlags& flags, Duration duration);

}  // namespace sluice::cli
