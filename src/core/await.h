// Await: runs an asynchronous call that reports through a callback and blocks the calling thread
// until the callback has delivered its result. The blocking forms of the asynchronous APIs
// (Store::Check over DoCheckBatchAsync, Acquirer::Acquire, the Redis client's sync calls) are
// Await over their async forms:
//
//   Status s = Await<Status>([&](auto done) { ResetAsync(scope, key, std::move(done)); });
//
// `start` is called once, on the calling thread, with the callback; the callback must be called
// exactly once, from any thread (inline too). Never call it where the callback needs the calling
// thread to run (a single-threaded event loop's own thread): it would wait forever.
#pragma once

#include <future>
#include <utility>

namespace sluice::core {

template <typename T, typename Start>
T Await(Start&& start) {
  std::promise<T> promise;
  std::future<T> future = promise.get_future();
  std::forward<Start>(start)([&promise](T result) { promise.set_value(std::move(result)); });
  return future.get();
}

}  // namespace sluice::core
