// IoThreads: threads, each running an io_context of its own. A Redis Client makes its own
// (ClientOptions::io_threads), or runs on a set shared with others: ClusterClient's node clients
// share one, so a reply from one master and the next call to another are handled on the same
// thread, and the writes that a thread's handlers queue leave together when they return; and
// `sluice serve` runs its HTTP connections and a single Redis's connections on one set, so that a
// check made on a thread goes out on a connection of that thread (Client picks it: current) and
// its answer comes back there, with no other thread woken on the way.
//
// Thread safety: size, at and current from any thread. Destroyed on none of its own threads: its
// destructor stops and joins them, and any handler still queued is destroyed without running.
#pragma once

#include <boost/asio.hpp>
#include <memory>
#include <thread>
#include <vector>

namespace sluice::redis {

class IoThreads {
 public:
  // Starts `count` threads (at least one).
  explicit IoThreads(int count);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  int size() const { return static_cast<int>(ios_.size()); }
  boost::asio::io_context& at(int i) { return *ios_[static_cast<size_t>(i)]; }
  // The index of the calling thread among these, or -1 when it is none of them.
  int current() const;

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> ios_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
};

}  // namespace sluice::redis
