// Shaping on a real Redis, in real time: 50 acquires arriving at once from 2 processes on a rule
// of 10/s are admitted 100 ms apart, in each process's arrival order, none early, none lost;
// past the waiter bound, refusals are immediate and counted; cancelled booked slots stay
// consumed. The machine is small and shared: spacing is asserted on the median and the worst
// case with generous room, and every wait is bounded.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/acquirer.h"
#include "sluice/redis_store.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

constexpr int kProcesses = 2;
constexpr int kPerProcess = 25;
constexpr int64_t kIntervalUs = 100'000;  // 10/s
// How far behind the schedule admissions may come back, in the median and at worst: the timer's
// wake-up and the reply's way on a busy 2-core machine, slower in the sanitizer builds (a load
// average of 8 has delayed one by 76 ms in the release build). Under one interval, so a missed
// slot still fails. Never early: that bound has no slack.
#ifdef SLUICE_SANITIZED
constexpr int64_t kMedianErrorUs = 25'000;
constexpr int64_t kMaxErrorUs = 120'000;
#else
constexpr int64_t kMedianErrorUs = 5'000;
constexpr int64_t kMaxErrorUs = 90'000;
#endif

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RedisServer* Server() {
  static std::unique_ptr<RedisServer> server = RedisServer::Start();
  return server.get();
}

Limit TenPerSecond() { return *Limit::Create(Algorithm::kGcra, 10, 1s, 1); }

// An Acquirer on its own RedisStore and io_context thread, as a service process would hold one.
class Shaper {
 public:
  Shaper(const std::string& prefix, AcquirerOptions options)
      : work_(boost::asio::make_work_guard(io_)), runner_([this] { io_.run(); }) {
    auto store = RedisStore::Create(
        {.url = Server()->url(), .timeout = 5s, .connect_timeout = 5s, .key_prefix = prefix});
    if (store.ok()) {
      store_ = std::move(*store);
      limiter_ = std::make_unique<Limiter>(*store_, "shape", TenPerSecond());
      acquirer_ = std::make_unique<Acquirer>(*limiter_, timers_, options);
    }
  }
  ~Shaper() {
    acquirer_.reset();
    work_.reset();
    runner_.join();
  }
  bool ok() const { return acquirer_ != nullptr; }
  Acquirer& acquirer() { return *acquirer_; }
  Limiter& limiter() { return *limiter_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread runner_;
  AsioTimers timers_{io_};
  std::unique_ptr<RedisStore> store_;
  std::unique_ptr<Limiter> limiter_;
  std::unique_ptr<Acquirer> acquirer_;
};

// Collects acquire completions and waits for them, bounded.
class Completions {
 public:
  struct Entry {
    int index = -1;
    int64_t called_us = 0;
    int64_t ended_us = 0;
    int64_t delay_us = 0;
    int rank = -1;  // order of completion
    int outcome = -1;
  };

  explicit Completions(int n) : entries_(n) {}

  AcquireCallback For(int index) {
    entries_[index].index = index;
    entries_[index].called_us = WallMicros();
    return [this, index](Result<Acquisition> r) {
      const int64_t now = WallMicros();
      std::lock_guard lock(mu_);
      Entry& e = entries_[index];
      e.ended_us = now;
      e.rank = done_++;
      e.outcome = r.ok() ? static_cast<int>(r->outcome) : -2;
      e.delay_us = r.ok() ? r->decision.delay.count() : 0;
      cv_.notify_all();
    };
  }
  bool WaitAll(Duration within) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, within, [&] { return done_ == static_cast<int>(entries_.size()); });
  }
  int done() {
    std::lock_guard lock(mu_);
    return done_;
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
  std::vector<Entry> entries_;
};

using Entry = Completions::Entry;

// In a child process: kPerProcess acquires at `start_us`, one key, max_wait 10 s.
std::vector<Entry> ShapeInChild(const std::string& prefix, int64_t start_us) {
  Shaper shaper(prefix, {.max_waiters_per_key = 100});
  Completions completions(kPerProcess);
  if (!shaper.ok()) return {};
  std::this_thread::sleep_for(Duration(std::max<int64_t>(start_us - WallMicros(), 0)));
  for (int i = 0; i < kPerProcess; ++i) {
    shaper.acquirer().AcquireAsync("partner-api", 1, 10s, completions.For(i));
  }
  completions.WaitAll(30s);
  return completions.entries();
}

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(Shaping, FiftyAtOnceFromTwoProcessesAreAdmitted100msApartInOrder) {
  ASSERT_NE(Server(), nullptr);
  const std::string prefix = "shape-" + std::to_string(getpid()) + ":";
  const int64_t start_us = WallMicros() + 500'000;  // both children arrive together

  // Fork before this process starts any thread; children report through a pipe.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      const std::vector<Entry> entries = ShapeInChild(prefix, start_us);
      const size_t bytes = entries.size() * sizeof(Entry);
      const bool written =
          !entries.empty() && write(fds[1], entries.data(), bytes) == static_cast<ssize_t>(bytes);
      _exit(written ? 0 : 1);  // no static destructors: they would stop Redis
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::vector<std::vector<Entry>> by_process(kProcesses, std::vector<Entry>(kPerProcess));
  for (int p = 0; p < kProcesses; ++p) {
    const size_t bytes = kPerProcess * sizeof(Entry);
    size_t got = 0;
    while (got < bytes) {
      const ssize_t n =
          read(fds[0], reinterpret_cast<char*>(by_process[p].data()) + got, bytes - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ASSERT_EQ(got, bytes) << "a child died without reporting";
  }
  close(fds[0]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  std::vector<int64_t> admitted_at;
  for (const auto& entries : by_process) {
    for (const Entry& e : entries) {
      // None lost; none completed before its booked slot.
      ASSERT_EQ(e.outcome, static_cast<int>(AcquireOutcome::kAdmitted)) << "acquire " << e.index;
      EXPECT_GE(e.ended_us - e.called_us, e.delay_us) << "acquire " << e.index;
      // First come, first served within the process.
      EXPECT_EQ(e.rank, e.index);
      admitted_at.push_back(e.ended_us);
    }
  }
  std::sort(admitted_at.begin(), admitted_at.end());
  // Redis TIME and WallMicros read the same clock. The first booking was made at or after
  // start_us, so slot k is at or after start_us + k intervals: nothing may come back before it.
  for (size_t k = 0; k < admitted_at.size(); ++k) {
    EXPECT_GE(admitted_at[k], start_us + static_cast<int64_t>(k) * kIntervalUs)
        << "admission " << k << " came before its slot";
  }
  // The schedule's origin is the most punctual admission's; the first reply can be late by a
  // round trip and a busy core, so it is no better a reference than any other.
  int64_t origin = admitted_at[0];
  for (size_t k = 0; k < admitted_at.size(); ++k) {
    origin = std::min(origin, admitted_at[k] - static_cast<int64_t>(k) * kIntervalUs);
  }
  std::vector<int64_t> gaps, errors;
  for (size_t k = 0; k < admitted_at.size(); ++k) {
    errors.push_back(admitted_at[k] - (origin + static_cast<int64_t>(k) * kIntervalUs));
    if (k > 0) gaps.push_back(admitted_at[k] - admitted_at[k - 1]);
  }
  const int64_t median_gap = Median(gaps);
  const int64_t median_error = Median(errors);
  const int64_t max_error = *std::max_element(errors.begin(), errors.end());
  std::printf(
      "shaping: 50 admissions over %.1f ms, median gap %.2f ms, median error %.2f ms, "
      "max error %.2f ms\n",
      (admitted_at.back() - admitted_at.front()) / 1e3, median_gap / 1e3, median_error / 1e3,
      max_error / 1e3);
  EXPECT_NEAR(median_gap, kIntervalUs, 5'000);
  EXPECT_LE(median_error, kMedianErrorUs);
  EXPECT_LE(max_error, kMaxErrorUs);
}

TEST(Shaping, PastTheWaiterBoundRefusalsAreImmediateAndCounted) {
  ASSERT_NE(Server(), nullptr);
  Shaper shaper("bound-" + std::to_string(getpid()) + ":", {.max_waiters_per_key = 10});
  ASSERT_TRUE(shaper.ok());
  // The key's burst is spent first, so every acquire admitted waits at least one interval for
  // its slot and stays in progress while the other 29 arrive.
  ASSERT_TRUE(shaper.limiter().Check("k")->allowed);
  Completions completions(30);
  std::vector<int64_t> refusal_us;
  for (int i = 0; i < 30; ++i) {
    const auto before = std::chrono::steady_clock::now();
    const int done_before = completions.done();
    shaper.acquirer().AcquireAsync("k", 1, 5s, completions.For(i));
    const auto took = std::chrono::steady_clock::now() - before;
    // Refused inside the call, without a round trip to Redis.
    if (completions.done() > done_before) {
      refusal_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    }
  }
  ASSERT_TRUE(completions.WaitAll(20s));
  int admitted = 0, refused = 0;
  for (const Entry& e : completions.entries()) {
    admitted += e.outcome == static_cast<int>(AcquireOutcome::kAdmitted);
    refused += e.outcome == static_cast<int>(AcquireOutcome::kQueueFull);
  }
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(refused, 20);
  EXPECT_EQ(shaper.acquirer().stats().queue_full, 20u);
  ASSERT_GE(refusal_us.size(), 20u);
  std::printf("queue bound: %zu immediate refusals, median %lld us, max %lld us\n",
              refusal_us.size(), static_cast<long long>(Median(refusal_us)),
              static_cast<long long>(*std::max_element(refusal_us.begin(), refusal_us.end())));
  EXPECT_LT(Median(refusal_us), 1'000);
  EXPECT_LT(*std::max_element(refusal_us.begin(), refusal_us.end()), 50'000);
}

// Cancelled waiters with booked slots end at once, and their slots stay consumed in Redis: the
// others keep their slots and a newcomer books after the last one.
TEST(Shaping, CancelledBookedSlotsStayConsumed) {
  ASSERT_NE(Server(), nullptr);
  Shaper shaper("cancel-" + std::to_string(getpid()) + ":", {});
  ASSERT_TRUE(shaper.ok());
  Completions completions(7);
  std::vector<AcquireId> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(shaper.acquirer().AcquireAsync("k", 1, 5s, completions.For(i)));
  // Bounded wait until all six have booked: the key then holds six slots, about 600 ms.
  for (int i = 0; i < 1000 && shaper.limiter().Check("k", 0)->reset_after <= 450ms; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(shaper.acquirer().Cancel(ids[2]));
  EXPECT_TRUE(shaper.acquirer().Cancel(ids[3]));
  // Six slots stay booked: the key is busy for about 600 ms from the first admission.
  EXPECT_GT(shaper.limiter().Check("k", 0)->reset_after, 450ms);
  shaper.acquirer().AcquireAsync("k", 1, 5s, completions.For(6));
  ASSERT_TRUE(completions.WaitAll(10s));
  const auto& e = completions.entries();
  EXPECT_EQ(e[2].outcome, static_cast<int>(AcquireOutcome::kCancelled));
  EXPECT_EQ(e[3].outcome, static_cast<int>(AcquireOutcome::kCancelled));
  for (int i : {0, 1, 4, 5, 6})
    EXPECT_EQ(e[i].outcome, static_cast<int>(AcquireOutcome::kAdmitted));
  // The others kept their slots, and the newcomer came after the last, not in a freed one. The
  // first slot was booked at or after the first call (Redis TIME reads the same clock).
  EXPECT_GE(e[5].ended_us, e[0].called_us + 500'000);
  EXPECT_GE(e[6].ended_us, e[0].called_us + 600'000);
}

}  // namespace
}  // namespace sluice
