// Exactness across processes: 4 processes, each with its own RedisStore and 32 checks in flight,
// hammer one key with a limit of 100 over a period long enough that nothing refills during the
// test; Redis TIME is the clock. Exactly 100 are admitted in total, by every algorithm
// (sliding_window is exact too here: its previous window is empty).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "sluice/redis_store.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kProcesses = 4;
constexpr int kInFlight = 32;
constexpr int kAttemptsPerProcess = 2000;
constexpr int64_t kLimit = 100;

struct Tally {
  int64_t admitted = 0;
  int64_t denied = 0;
  int64_t errors = 0;
};

// Runs in a child process: kAttemptsPerProcess checks, kInFlight at a time.
Tally Hammer(const std::string& url, const std::string& prefix, const Limit& limit) {
  Tally tally;
  auto store =
      RedisStore::Create({.url = url, .timeout = 10s, .connect_timeout = 5s, .key_prefix = prefix});
  if (!store.ok()) {
    tally.errors = kAttemptsPerProcess;
    return tally;
  }
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int i = 0; i < kAttemptsPerProcess; ++i) {
    {
      std::unique_lock lock(mu);
      if (!cv.wait_until(lock, deadline, [&] { return in_flight < kInFlight; })) break;
      ++in_flight;
    }
    (*store)->CheckAsync({.scope = "exact", .limit = &limit, .key = "one-key", .cost = 1},
                         [&](Result<Decision> d) {
                           std::lock_guard lock(mu);
                           if (!d.ok()) {
                             ++tally.errors;
                           } else if (d->allowed) {
                             ++tally.admitted;
                           } else {
                             ++tally.denied;
                           }
                           --in_flight;
                           cv.notify_all();
                         });
  }
  std::unique_lock lock(mu);
  cv.wait_until(lock, deadline, [&] { return in_flight == 0; });
  tally.errors += kAttemptsPerProcess - (tally.admitted + tally.denied + tally.errors);
  return tally;
}

class Exactness : public ::testing::TestWithParam<Algorithm> {};

TEST_P(Exactness, FourProcessesAdmitExactlyTheLimit) {
  const RedisTarget* target = SharedTarget();
  ASSERT_NE(target, nullptr);
  const std::string prefix =
      "exact-" + std::to_string(getpid()) + "-" + std::string(AlgorithmName(GetParam())) + ":";
  auto limit = Limit::Create(GetParam(), kLimit, PeriodAwayFromABoundary());
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();

  // Fork before this process starts any thread; children report through a pipe.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      const Tally t = Hammer(target->url, prefix, *limit);
      const ssize_t written = write(fds[1], &t, sizeof(t));
      _exit(written == sizeof(t) ? 0 : 1);  // no static destructors: they would stop Redis
    }
    children.push_back(pid);
  }
  close(fds[1]);

  Tally total;
  for (int p = 0; p < kProcesses; ++p) {
    Tally t;
    ASSERT_EQ(read(fds[0], &t, sizeof(t)), static_cast<ssize_t>(sizeof(t)))
        << "a child died without reporting";
    total.admitted += t.admitted;
    total.denied += t.denied;
    total.errors += t.errors;
  }
  close(fds[0]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  std::printf("exactness %s: %lld admitted, %lld denied, %lld errors of %d attempts\n",
              std::string(AlgorithmName(GetParam())).c_str(),
              static_cast<long long>(total.admitted), static_cast<long long>(total.denied),
              static_cast<long long>(total.errors), kProcesses * kAttemptsPerProcess);
  EXPECT_EQ(total.errors, 0);
  EXPECT_EQ(total.admitted, kLimit);
  EXPECT_EQ(total.admitted + total.denied, kProcesses * kAttemptsPerProcess);
  EXPECT_GE(ExpectEveryKeyExpires(*target, prefix + "*"), 1u);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Exactness, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

}  // namespace
}  // namespace sluice::testing
