#include "redis/io_threads.h"

#include <algorithm>

namespace sluice::redis {
namespace {

// The IoThreads whose thread this is, and its index there.
thread_local const IoThreads* running_threads = nullptr;
thread_local int running_index = -1;

}  // namespace

IoThreads::IoThreads(int count) {
  for (int t = 0; t < std::max(count, 1); ++t) {
    auto& io = ios_.emplace_back(std::make_unique<boost::asio::io_context>(1));
    guards_.emplace_back(boost::asio::make_work_guard(*io));
  }
  for (int t = 0; t < size(); ++t) {
    threads_.emplace_back([this, t, &io = *ios_[static_cast<size_t>(t)]] {
      running_threads = this;
      running_index = t;
      io.run();
    });
  }
}

IoThreads::~IoThreads() {
  guards_.clear();
  for (auto& io : ios_) io->stop();
  for (auto& t : threads_) t.join();
}

int IoThreads::current() const { return running_threads == this ? running_index : -1; }

}  // namespace sluice::redis
