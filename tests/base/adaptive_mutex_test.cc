// base::AdaptiveMutex under contention: threads that take it around a read-modify-write of a
// plain counter lose no update. The test command also runs it under ThreadSanitizer, which
// reports the counter's accesses as a race unless the mutex orders them.
#include "base/adaptive_mutex.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

namespace sluice::base {
namespace {

struct Counter {
  AdaptiveMutex mu;
  int64_t value SLUICE_GUARDED_BY(mu) = 0;
};

TEST(AdaptiveMutex, ThreadsTakingItLoseNoUpdate) {
  constexpr int kThreads = 4;
  constexpr int kIncrements = 20000;
  Counter counter;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < kIncrements; ++i) {
        AdaptiveMutexLock lock(counter.mu);
        const int64_t seen = counter.value;
        if (i % 64 == 0) std::this_thread::yield();  // holds it across a reschedule, at times
        counter.value = seen + 1;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  AdaptiveMutexLock lock(counter.mu);
  EXPECT_EQ(counter.value, int64_t{kThreads} * kIncrements);
}

}  // namespace
}  // namespace sluice::base
