// SentinelClient::Alarm: what calls tell the sentinels' thread: ask the sentinels again
// (UNAVAILABLE, READONLY), and which master refused a write with READONLY (not to be used again).
// The thread waits on `fd` (an eventfd) beside its subscriptions.
//
// Thread safety: Raise and the atomics from any thread; Clear on the sentinels' thread.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "redis/sentinel_client.h"

namespace sluice::redis {

struct SentinelClient::Alarm {
  Alarm() : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Alarm() { ::close(fd); }
  void Raise() {
    if (raised.exchange(true, std::memory_order_acq_rel)) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
  }
  void Clear() {
    raised.store(false, std::memory_order_release);
    uint64_t count;
    [[maybe_unused]] const ssize_t n = ::read(fd, &count, sizeof count);
  }
  const int fd;
  std::atomic<bool> raised{false};
  std::atomic<const Client*> readonly{nullptr};
};

}  // namespace sluice::redis
