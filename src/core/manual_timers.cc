#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "base/mutex.h"
#include "sluice/timers.h"

namespace sluice {

struct ManualTimers::Impl {
  explicit Impl(ManualClock& c) : clock(c) {}
  ManualClock& clock;
  mutable base::Mutex mu;
  Id next_id SLUICE_GUARDED_BY(mu) = 1;
  // By deadline, then start order.
  std::map<std::pair<Time, Id>, std::function<void()>> due SLUICE_GUARDED_BY(mu);
  std::unordered_map<Id, Time> deadline_of SLUICE_GUARDED_BY(mu);
};

ManualTimers::ManualTimers(ManualClock& clock) : impl_(std::make_unique<Impl>(clock)) {}
ManualTimers::~ManualTimers() = default;

Time ManualTimers::now() const { return impl_->clock.now(); }

Timers::Id ManualTimers::Start(Duration after, std::function<void()> fire) {
  base::MutexLock lock(impl_->mu);
  const Id id = impl_->next_id++;
  const Time at = impl_->clock.now() + std::max(after, Duration(0));
  impl_->due.emplace(std::make_pair(at, id), std::move(fire));
  impl_->deadline_of.emplace(id, at);
  return id;
}

void ManualTimers::Cancel(Id id) {
  base::MutexLock lock(impl_->mu);
  auto it = impl_->deadline_of.find(id);
  if (it == impl_->deadline_of.end()) return;
  impl_->due.erase(std::make_pair(it->second, id));
  impl_->deadline_of.erase(it);
}

void ManualTimers::Advance(Duration by) {
  const Time target = impl_->clock.now() + by;
  while (true) {
    std::function<void()> fire;
    {
      base::MutexLock lock(impl_->mu);
      if (impl_->due.empty() || impl_->due.begin()->first.first > target) break;
      auto first = impl_->due.begin();
      const auto [at, id] = first->first;
      fire = std::move(first->second);
      impl_->due.erase(first);
      impl_->deadline_of.erase(id);
      if (impl_->clock.now() < at) impl_->clock.Set(at);
    }
    fire();
  }
  if (impl_->clock.now() < target) impl_->clock.Set(target);
}

size_t ManualTimers::pending() const {
  base::MutexLock lock(impl_->mu);
  return impl_->due.size();
}

}  // namespace sluice
