#include "redis/io_threads.h"

#include <algorithm>

namespace sluice::redis {

IoThreads::IoThreads(int count) {
  for (int t = 0; t < std::max(count, 1); ++t) {
    auto& io = ios_.emplace_back(std::make_unique<boost::asio::io_context>(1));
    guards_.emplace_back(boost::asio::make_work_guard(*io));
  }
  for (auto& io : ios_) threads_.emplace_back([&io = *io] { io.run(); });
}

IoThreads::~IoThreads() {
  guards_.clear();
  for (auto& io : ios_) io->stop();
  for (auto& t : threads_) t.join();
}

}  // namespace sluice::redis
