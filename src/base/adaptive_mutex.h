// base::AdaptiveMutex, a mutex that, finding itself taken, spins a while before it sleeps in the
// kernel (glibc's adaptive mutex: it spins at most glibc.pthread.mutex_spin_count times, 100 by
// default, and learns from its past waits how long to), and base::AdaptiveMutexLock, which holds
// one for its scope. For locks held about as long as a cache miss, as a MemoryStore shard's: a
// waiter that sleeps costs a system call on each side, many times the time the lock is held.
// Uncontended it costs what std::mutex costs. With no condition variable: use base::Mutex for
// one.
//
// Thread safety: as std::mutex.
#pragma once

#include <pthread.h>

#include "base/thread_annotations.h"

namespace sluice::base {

class SLUICE_CAPABILITY("mutex") AdaptiveMutex {
 public:
  AdaptiveMutex() = default;
  ~AdaptiveMutex() { pthread_mutex_destroy(&mu_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

  void Lock() SLUICE_ACQUIRE() { pthread_mutex_lock(&mu_); }
  void Unlock() SLUICE_RELEASE() { pthread_mutex_unlock(&mu_); }

 private:
  pthread_mutex_t mu_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};

class SLUICE_SCOPED_CAPABILITY AdaptiveMutexLock {
 public:
  explicit AdaptiveMutexLock(AdaptiveMutex& mu) SLUICE_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~AdaptiveMutexLock() SLUICE_RELEASE() { mu_.Unlock(); }
  AdaptiveMutexLock(const AdaptiveMutexLock&) = delete;
  AdaptiveMutexLock& operator=(const AdaptiveMutexLock&) = delete;

 private:
  AdaptiveMutex& mu_;
};

}  // namespace sluice::base
