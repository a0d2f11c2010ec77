// base::Mutex, a std::mutex the thread-safety analysis knows (base/thread_annotations.h), and
// base::MutexLock, which holds one for its scope, can give it up and take it again, and waits on
// a std::condition_variable with it. Fields guarded by a Mutex are declared SLUICE_GUARDED_BY(it);
// the analysis then checks, in clang builds, that every access holds it.
//
// Thread safety: as std::mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace sluice::base {

class SLUICE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() SLUICE_ACQUIRE() { mu_.lock(); }
  void Unlock() SLUICE_RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

class SLUICE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) SLUICE_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() SLUICE_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Gives the mutex up before the scope ends (to call out without it), and takes it again.
  void Unlock() SLUICE_RELEASE() { lock_.unlock(); }
  void Lock() SLUICE_ACQUIRE() { lock_.lock(); }

  // Waits for `cv` to be notified (or a spurious wake-up), with the mutex given up meanwhile and
  // held again on return: call it in a loop that checks what it waits for.
  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  // As Wait, returning at `deadline` at the latest.
  template <typename Clock, typename D>
  void WaitUntil(std::condition_variable& cv, std::chrono::time_point<Clock, D> deadline) {
    cv.wait_until(lock_, deadline);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace sluice::base
