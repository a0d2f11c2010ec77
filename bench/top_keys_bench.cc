// What TopKeys costs a denial (TopKeys::Record, on the decision path of every denied check) and
// a read (TopKeys::Top, once a second per dashboard): one key denied over and over (a counter
// found and incremented); a new key at each denial (the smallest counter taken over, the worst
// case); 1M keys drawn Zipf(1.0); from 1 and 2 threads on one rule.
//
//   build/release/bench/sluice_top_keys_benchmarks --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "http/top_keys.h"

namespace {

using sluice::http::TopKeys;

TopKeys& Shared() {
  static TopKeys top(sluice::SystemClock::Instance());
  return top;
}

std::vector<std::string> Keys(size_t count, bool zipf) {
  std::mt19937_64 random(7);
  std::vector<double> cdf;
  double total = 0;
  for (size_t rank = 1; rank <= (1 << 20); ++rank) cdf.push_back(total += 1.0 / rank);
  std::vector<std::string> keys;
  for (size_t i = 0; i < count; ++i) {
    const size_t index =
        zipf ? std::lower_bound(cdf.begin(), cdf.end(),
                                std::uniform_real_distribution<double>(0, total)(random)) -
                   cdf.begin()
             : i;
    keys.push_back("user:" + std::to_string(index));
  }
  return keys;
}

void BM_RecordSameKey(benchmark::State& state) {
  for (auto _ : state) Shared().Record("same", "user:42");
}
BENCHMARK(BM_RecordSameKey)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecordNewKeys(benchmark::State& state) {
  static const std::vector<std::string> keys = Keys(1 << 20, false);
  size_t i = state.thread_index() * 7919;
  for (auto _ : state) Shared().Record("new", keys[i++ & (keys.size() - 1)]);
}
BENCHMARK(BM_RecordNewKeys)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecordZipfKeys(benchmark::State& state) {
  static const std::vector<std::string> keys = Keys(1 << 20, true);
  size_t i = state.thread_index() * 7919;
  for (auto _ : state) Shared().Record("zipf", keys[i++ & (keys.size() - 1)]);
}
BENCHMARK(BM_RecordZipfKeys)->Threads(1)->Threads(2)->UseRealTime();

// The dashboard's read: the top 10 of a rule whose 5 slots are full.
void BM_Top10(benchmark::State& state) {
  sluice::ManualClock clock;
  TopKeys top(clock);
  const std::vector<std::string> keys = Keys(1 << 16, true);
  for (int slot = 0; slot < 5; ++slot) {
    for (const std::string& key : keys) top.Record("api", key);
    clock.Advance(std::chrono::minutes(1));
  }
  clock.Advance(-std::chrono::seconds(1));
  for (auto _ : state) benchmark::DoNotOptimize(top.Top("api", 10));
}
BENCHMARK(BM_Top10);

}  // namespace

BENCHMARK_MAIN();
