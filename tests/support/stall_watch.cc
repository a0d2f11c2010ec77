#include "support/stall_watch.h"

namespace sluice::testing {

StallWatch::StallWatch() {
  sleeper_ = std::thread([this] {
    using namespace std::chrono_literals;
    for (int i = 0; !stop_.load() && i < 1'000'000; ++i) {  // 1000 s at most
      const auto start = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(1ms);
      const auto late = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - start - 1ms);
      if (late.count() > worst_us_.load()) worst_us_.store(late.count());  // the only writer
    }
  });
}

StallWatch::~StallWatch() {
  stop_ = true;
  sleeper_.join();
}

}  // namespace sluice::testing
