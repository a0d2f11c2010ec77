// SigpipeBlocked: while one lives, SIGPIPE is blocked in the calling thread, and one raised
// meanwhile by this thread's writes is taken back when it ends. A write to a socket whose peer
// has gone then fails with EPIPE instead of ending the process: for writes made by code that
// cannot pass MSG_NOSIGNAL (OpenSSL's socket BIO writes with write(2)), without changing the
// process's signal handling, which is its owner's.
//
// Thread safety: per thread; construct and destroy it on the same thread, scoped to the calls.
#pragma once

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace sluice::base {

class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }

  ~SigpipeBlocked() {
    const int saved = errno;  // the caller reads the write's errno after this
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec now{};
        while (sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    errno = saved;
  }

  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_;
  sigset_t previous_;
  bool was_pending_ = false;
};

}  // namespace sluice::base
