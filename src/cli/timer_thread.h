// TimerThread: Timers (AsioTimers) on an io_context run by one thread of their own, so that what
// waits on them never takes an I/O thread: `sluice serve`'s /v1/acquire waiters and the ends of
// its leases, the leases of `sluice bench`. Whatever started timers on it must be gone before it
// is destroyed.
//
// Thread safety: timers() may be used from any thread; construct and destroy on one.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

#include "sluice/timers.h"

namespace sluice::cli {

class TimerThread {
 public:
  TimerThread() : work_(boost::asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~TimerThread() {
    io_.stop();
    thread_.join();
  }
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  Timers& timers() { return timers_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  AsioTimers timers_{io_};
};

}  // namespace sluice::cli
