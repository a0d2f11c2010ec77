// Threads hammering shared state on a frozen clock: every algorithm admits exactly the limit, on
// one hot key and on many keys at once. The test command runs this binary under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"

namespace sluice {
namespace {

constexpr int kThreads = 8;
constexpr int kAttemptsPerThread = 1000;

// Admitted count per key after every thread made its attempts, keys taken round-robin. The
// threads start together, so their checks really interleave.
std::vector<int64_t> AdmittedByThreads(Limiter& limiter, const std::vector<std::string>& keys) {
  std::vector<std::atomic<int64_t>> admitted(keys.size());
  std::atomic<int64_t> errors{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kAttemptsPerThread; ++i) {
        const size_t k = static_cast<size_t>(t + i) % keys.size();
        auto d = limiter.Check(keys[k]);
        if (!d.ok()) {
          errors.fetch_add(1, std::memory_order_relaxed);
        } else if (d->allowed) {
          admitted[k].fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  std::vector<int64_t> counts;
  for (const auto& a : admitted) counts.push_back(a.load());
  return counts;
}

class Concurrency : public ::testing::TestWithParam<Algorithm> {};

// 8000 attempts against a limit of 1000. For sliding_window the previous window is empty at a
// frozen clock, so its estimate is exact too.
TEST_P(Concurrency, OneHotKeyAdmitsExactlyTheLimit) {
  ManualClock clock;  // never advanced
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  auto limit = Limit::Create(GetParam(), 1000, std::chrono::seconds(60));
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store, "hot", *limit);
  EXPECT_EQ(AdmittedByThreads(limiter, {"the-key"}), std::vector<int64_t>{1000});
}

// 8000 attempts over 64 keys: 125 each against a limit of 20 each.
TEST_P(Concurrency, ManyKeysEachAdmitExactlyTheirLimit) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .shards = 8});
  auto limit = Limit::Create(GetParam(), 20, std::chrono::seconds(60));
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store, "many", *limit);
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) keys.push_back(std::string("key-").append(std::to_string(i)));
  EXPECT_EQ(AdmittedByThreads(limiter, keys), std::vector<int64_t>(keys.size(), 20));
  EXPECT_EQ(store.size(), keys.size());
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Concurrency, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

}  // namespace
}  // namespace sluice
