// How late this process's threads are woken while a StallWatch lives: a thread of its own sleeps
// 1 ms at a time and keeps the worst lateness it saw. A loaded 2-core machine (other tests, the
// hypervisor) stalls every thread of a process now and then, by tens of milliseconds; a timing
// bound that adds worst() holds the code under test to its own latency, not the machine's.
//
// Thread-safe: worst() may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace sluice::testing {

class StallWatch {
 public:
  StallWatch();
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // The longest a 1 ms sleep overran by so far.
  std::chrono::microseconds worst() const { return std::chrono::microseconds(worst_us_.load()); }

 private:
  std::atomic<int64_t> worst_us_{0};
  std::atomic<bool> stop_{false};
  std::thread sleeper_;
};

}  // namespace sluice::testing
