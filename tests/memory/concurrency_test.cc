// Threads hammering shared state on a frozen clock: every algorithm admits exactly the limit.
// The test command runs this binary under ThreadSanitizer too.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"

namespace sluice {
namespace {

constexpr int kThreads = 8;
constexpr int64_t kLimit = 1000;
constexpr int kAttemptsPerThread = 500;  // 4000 attempts against a limit of 1000

int64_t AdmittedByThreads(Limiter& limiter, const std::vector<std::string>& keys) {
  std::atomic<int64_t> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAttemptsPerThread; ++i) {
        const auto& key = keys[(t + i) % keys.size()];
        auto d = limiter.Check(key);
        ASSERT_TRUE(d.ok()) << d.status().ToString();
        if (d->allowed) admitted.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  return admitted.load();
}

class Concurrency : public ::testing::TestWithParam<Algorithm> {};

TEST_P(Concurrency, OneHotKeyAdmitsExactlyTheLimit) {
  ManualClock clock;  // frozen
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  auto limit = Limit::Create(GetParam(), kLimit, std::chrono::seconds(60));
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store, "hot", *limit);
  EXPECT_EQ(AdmittedByThreads(limiter, {"the-key"}), kLimit);
}

TEST_P(Concurrency, ManyKeysEachAdmitExactlyTheirLimit) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  auto limit = Limit::Create(GetParam(), 50, std::chrono::seconds(60));
  ASSERT_TRUE(limit.ok());
  Limiter limiter(store, "many", *limit);
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) keys.push_back(std::string("key-").append(std::to_string(i)));
  // 4000 attempts over 16 keys: 250 each, 50 admitted each.
  EXPECT_EQ(AdmittedByThreads(limiter, keys), 16 * 50);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Concurrency, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

}  // namespace
}  // namespace sluice
