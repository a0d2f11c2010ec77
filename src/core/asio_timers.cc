#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <unordered_map>

#include "base/mutex.h"
#include "sluice/timers.h"

namespace sluice {

struct AsioTimers::Impl {
  explicit Impl(boost::asio::io_context& context) : io(context) {}
  boost::asio::io_context& io;
  base::Mutex mu;
  Id next_id SLUICE_GUARDED_BY(mu) = 1;
  // A timer is here until it fires or is cancelled; destroying it cancels its wait.
  std::unordered_map<Id, std::unique_ptr<boost::asio::steady_timer>> timers SLUICE_GUARDED_BY(mu);
};

AsioTimers::AsioTimers(boost::asio::io_context& io) : impl_(std::make_shared<Impl>(io)) {}

AsioTimers::~AsioTimers() {
  base::MutexLock lock(impl_->mu);
  impl_->timers.clear();
}

Time AsioTimers::now() const { return SystemClock::Instance().now(); }

Timers::Id AsioTimers::Start(Duration after, std::function<void()> fire) {
  base::MutexLock lock(impl_->mu);
  const Id id = impl_->next_id++;
  auto timer = std::make_unique<boost::asio::steady_timer>(impl_->io);
  timer->expires_after(std::max(after, Duration(0)));
  // The handler takes the lock, so it cannot run before the timer is registered below.
  timer->async_wait([impl = impl_, id, fire = std::move(fire)](const boost::system::error_code&) {
    {
      base::MutexLock handler_lock(impl->mu);
      auto it = impl->timers.find(id);
      if (it == impl->timers.end()) return;  // cancelled
      impl->timers.erase(it);
    }
    fire();
  });
  impl_->timers.emplace(id, std::move(timer));
  return id;
}

void AsioTimers::Cancel(Id id) {
  base::MutexLock lock(impl_->mu);
  impl_->timers.erase(id);
}

}  // namespace sluice
