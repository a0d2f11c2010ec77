// Await: runs an asynchronous call that reports through a callback and blocks the calling thread
// until the callback has delivered its result. The blocking forms of the asynchronous APIs
// (Store::Check over Store::CheckAsync, Acquirer::Acquire, the Redis client's sync calls) are
// Await over their async forms:
//
//   Status s = Await<Status>([&](auto done) { ResetAsync(scope, key, std::move(done)); });
//
// `start` is called once, on the calling thread, with the callback; the callback must be called
// exactly once, from any thread (inline too). A callback that runs inline (an in-process store)
// costs no lock and no wait. Never call it where the callback needs the calling thread to run (a
// single-threaded event loop's own thread): it would wait forever.
#pragma once

#include <atomic>
#include <condition_variable>
#include <optional>
#include <utility>

#include "base/mutex.h"

namespace sluice::base {

template <typename T, typename Start>
T Await(Start&& start) {
  enum Phase : int { kStarted, kDelivered, kWaiting };
  struct Slot {
    std::optional<T> value;  // written once, before phase becomes kDelivered
    std::atomic<int> phase{kStarted};
    Mutex mu;
    std::condition_variable woken;
    bool delivered SLUICE_GUARDED_BY(mu) = false;
  } slot;
  std::forward<Start>(start)([&slot](T result) {
    slot.value.emplace(std::move(result));
    if (slot.phase.exchange(kDelivered) != kWaiting) return;  // the waiter will see it
    // The waiter waits on the lock: it cannot be gone before this notifies and lets go of it.
    MutexLock lock(slot.mu);
    slot.delivered = true;
    slot.woken.notify_one();
  });
  if (slot.phase.load() == kDelivered) return std::move(*slot.value);
  MutexLock lock(slot.mu);
  if (slot.phase.exchange(kWaiting) == kDelivered) return std::move(*slot.value);
  while (!slot.delivered) lock.Wait(slot.woken);
  return std::move(*slot.value);
}

}  // namespace sluice::base
