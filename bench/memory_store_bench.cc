// Decisions per second of each algorithm on a MemoryStore, through Limiter::Check with the
// system clock: one hot key; 1M keys drawn uniformly; 1M keys drawn Zipf(1.0); 1 and 2 threads
// (each thread on its own keys, to measure scaling on distinct keys).
//
//   build/release/bench/sluice_benchmarks --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"

namespace {

using sluice::Algorithm;

constexpr size_t kKeys = 1 << 20;  // about 1M
constexpr size_t kDraws = 1 << 22;

enum class Pattern { kHotKey, kUniform, kZipf };

// "user:0001234": built in place, as a server has the key of the request it just parsed.
class KeyBuffer {
 public:
  std::string_view For(size_t index) {
    for (int i = 11; i >= 5; --i, index /= 10) text_[i] = static_cast<char>('0' + index % 10);
    return {text_, 12};
  }

 private:
  char text_[12] = {'u', 's', 'e', 'r', ':'};
};

// Key indices in draw order, fixed in advance so the timed loop only indexes.
const std::vector<uint32_t>& Draws(Pattern pattern) {
  static const std::vector<uint32_t> uniform = [] {
    std::mt19937_64 rng(1);
    std::vector<uint32_t> d(kDraws);
    for (auto& x : d) x = static_cast<uint32_t>(rng() % kKeys);
    return d;
  }();
  static const std::vector<uint32_t> zipf = [] {
    // Inverse-CDF sampling of P(rank r) ∝ 1/r over kKeys ranks; ranks are scattered over the
    // key space so hot keys land in different shards.
    std::vector<double> cdf(kKeys);
    double sum = 0;
    for (size_t r = 0; r < kKeys; ++r) cdf[r] = (sum += 1.0 / static_cast<double>(r + 1));
    std::mt19937_64 rng(2);
    std::uniform_real_distribution<double> u(0, sum);
    std::vector<uint32_t> d(kDraws);
    for (auto& x : d) {
      const size_t rank = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
      x = static_cast<uint32_t>((rank * 2654435761u) % kKeys);
    }
    return d;
  }();
  static const std::vector<uint32_t> hot(kDraws, 0);
  switch (pattern) {
    case Pattern::kUniform:
      return uniform;
    case Pattern::kZipf:
      return zipf;
    case Pattern::kHotKey:
      break;
  }
  return hot;
}

struct Shared {
  std::unique_ptr<sluice::MemoryStore> store;
  std::unique_ptr<sluice::Limiter> limiter;
};
Shared shared;

// 10 per second per key: over 1M keys nearly every decision admits; a hot key is mostly denied.
sluice::Limit BenchLimit(Algorithm a) {
  return *sluice::Limit::Create(a, 10, std::chrono::seconds(1));
}

void Check(benchmark::State& state, Algorithm algorithm, Pattern pattern) {
  if (state.thread_index() == 0) {
    shared.store = std::make_unique<sluice::MemoryStore>();
    shared.limiter =
        std::make_unique<sluice::Limiter>(*shared.store, "bench", BenchLimit(algorithm));
    if (pattern != Pattern::kHotKey) {
      KeyBuffer warm;
      for (size_t k = 0; k < kKeys; ++k) (void)shared.limiter->Check(warm.For(k));
    }
  }
  KeyBuffer key;
  const auto& draws = Draws(pattern);
  const size_t threads = static_cast<size_t>(state.threads());
  const size_t me = static_cast<size_t>(state.thread_index());
  size_t i = me * 7919;
  int64_t allowed = 0;
  for (auto _ : state) {
    // Thread t only uses keys with index ≡ t (mod threads): distinct keys per thread.
    const uint32_t drawn = draws[i++ & (kDraws - 1)];
    const size_t index = pattern == Pattern::kHotKey ? me : drawn - drawn % threads + me;
    auto d = shared.limiter->Check(key.For(index % kKeys));
    allowed += d.ok() && d->allowed;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["admitted"] =
      benchmark::Counter(static_cast<double>(allowed), benchmark::Counter::kAvgIterations);
  if (state.thread_index() == 0) {
    state.counters["keys_held"] = static_cast<double>(shared.store->size());
  }
}

void Register() {
  for (Algorithm a : sluice::kAllAlgorithms) {
    for (auto [pattern, name] :
         {std::pair{Pattern::kHotKey, "hot_key"}, std::pair{Pattern::kUniform, "uniform_1M"},
          std::pair{Pattern::kZipf, "zipf_1M"}}) {
      const std::string label = std::string(sluice::AlgorithmName(a)) + "/" + name;
      benchmark::RegisterBenchmark(label.c_str(), Check, a, pattern)
          ->Threads(1)
          ->Threads(2)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // glibc's locks skip their atomic instructions until a process starts its second thread. A
  // server has many, so start one first: the 1-thread figures then pay what they pay in a server.
  std::thread([] {}).join();
  benchmark::Initialize(&argc, argv);
  Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
