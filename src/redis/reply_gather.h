// ReplyGather: the replies to a batch's calls, which arrive one by one on any thread, handed
// together to the batch's callback once the last has come, in the batch's order.
//
//   auto gather = std::make_shared<ReplyGather>(calls.size(), std::move(done));
//   ... for call i: ReplyGather::Slot(gather, i) as its ReplyCallback
//
// Thread safety: the slots may be called concurrently, each exactly once; `done` runs once, on
// the thread of the last reply, with no lock held.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "redis/client_options.h"

namespace sluice::redis {

class ReplyGather {
 public:
  ReplyGather(size_t calls, BatchReplyCallback done)
      : done_(std::move(done)), results_(calls, Status::Internal("no reply")), left_(calls) {}

  // The callback of call `i`.
  static ReplyCallback Slot(std::shared_ptr<ReplyGather> gather, size_t i) {
    return [gather = std::move(gather), i](Result<Reply> reply) {
      gather->Answer(i, std::move(reply));
    };
  }

 private:
  void Answer(size_t i, Result<Reply> reply) SLUICE_EXCLUDES(mu_) {
    base::MutexLock lock(mu_);
    results_[i] = std::move(reply);
    if (--left_ > 0) return;
    std::vector<Result<Reply>> results = std::move(results_);
    lock.Unlock();
    done_(std::move(results));
  }

  const BatchReplyCallback done_;
  base::Mutex mu_;
  std::vector<Result<Reply>> results_ SLUICE_GUARDED_BY(mu_);
  size_t left_ SLUICE_GUARDED_BY(mu_);
};

}  // namespace sluice::redis
