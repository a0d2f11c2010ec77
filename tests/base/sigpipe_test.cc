// base::SigpipeBlocked: a write to a socket whose peer has gone fails with EPIPE while one lives,
// instead of ending the process (SIGPIPE's default action, which this test keeps); the signal
// the write raised is taken back, and SIGPIPE is unblocked again after it.
#include "base/sigpipe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace sluice::base {
namespace {

bool SigpipePending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

bool SigpipeBlockedNow() {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

TEST(SigpipeBlockedTest, AWriteToAPeerGoneFailsWithEpipeAndTheSignalIsTakenBack) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL) << "the test needs SIGPIPE's default action";
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ::close(fds[1]);
  {
    const SigpipeBlocked blocked;
    EXPECT_TRUE(SigpipeBlockedNow());
    const char byte = 'x';
    EXPECT_EQ(::write(fds[0], &byte, 1), -1);
    EXPECT_EQ(errno, EPIPE);
  }
  EXPECT_FALSE(SigpipePending());
  EXPECT_FALSE(SigpipeBlockedNow());
  ::close(fds[0]);
}

}  // namespace
}  // namespace sluice::base
