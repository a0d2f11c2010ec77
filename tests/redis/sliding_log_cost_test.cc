// sliding_log on Redis: what a check costs Redis does not grow with the log. A denial with a cost
// near the limit on a log of 100 000 entries used to page through the whole log in Lua to find
// its retry_after (0.5 to 0.9 s of Redis time), and a denial changes nothing, so it could be
// repeated at will. Measured in Redis's own SLOWLOG, which times each command inside the server.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <latch>
#include <string>

#include "sluice/clock.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

class SlidingLogRedisCost : public RedisStoreTest {};

// The largest log a config accepts, one unit per microsecond, then the worst denials: costs near
// the limit (the oldest entries must leave), a cost of 1 and peeks. Every one must take under a
// millisecond of Redis time: with slowlog-log-slower-than at 1000 µs, nothing is logged. A round
// is run again, up to five times, when one was: on a loaded machine the server can be preempted
// in the middle of a fast script, while a slow one is slow every time.
TEST_F(SlidingLogRedisCost, WorstDenialsOnTheLargestLogStayUnderAMillisecond) {
  ManualClock clock;
  auto store = MakeStore({.connections_per_thread = 1, .clock = &clock, .expiry_margin = 10min});
  ASSERT_NE(store, nullptr);
  constexpr int64_t kEntries = Limit::kMaxSlidingLogCount;
  const Limit limit = *Limit::Create(Algorithm::kSlidingLog, kEntries, 1h);
  const CheckRequest one{.scope = "log", .limit = &limit, .key = "k", .cost = 1};

  // The script is loaded first: a call answered NOSCRIPT is sent again, behind later ones.
  ASSERT_TRUE(store->Check({.scope = "warm-up", .limit = &limit, .key = "k", .cost = 0}).ok());
  std::atomic<int64_t> admitted{0};
  for (int64_t filled = 0; filled < kEntries;) {
    const int64_t wave = std::min<int64_t>(2'000, kEntries - filled);
    std::latch answered(wave);
    for (int64_t i = 0; i < wave; ++i) {
      clock.Advance(1us);
      store->CheckAsync(one, [&](Result<Decision> d) {
        if (d.ok() && d->allowed) admitted.fetch_add(1);
        answered.count_down();
      });
    }
    answered.wait();
    filled += wave;
  }
  ASSERT_EQ(admitted.load(), kEntries);
  const std::string log_key = store->KeysOf("log", "k")[0];
  ASSERT_EQ(Command({"ZCARD", log_key}).integer, kEntries) << "one entry per admission instant";

  const auto deny_the_worst = [&] {
    for (int64_t cost : {kEntries, kEntries - 1, kEntries / 2, int64_t{1}, int64_t{0}}) {
      for (int repeat = 0; repeat < 3; ++repeat) {
        CheckRequest request = one;
        request.cost = cost;
        const Result<Decision> d = store->Check(request);
        ASSERT_TRUE(d.ok()) << d.status().ToString();
        ASSERT_FALSE(d->allowed) << "cost " << cost;
        ASSERT_GT(d->retry_after.count(), 0);
      }
    }
  };
  // Commands a script calls are logged too when they are slow (or with a threshold of 0).
  Command({"CONFIG", "SET", "slowlog-max-len", "10000"});
  Command({"CONFIG", "SET", "slowlog-log-slower-than", "1000"});
  int64_t logged = -1;
  for (int round = 0; round < 5 && logged != 0; ++round) {
    Command({"SLOWLOG", "RESET"});
    deny_the_worst();
    if (HasFatalFailure()) return;
    logged = Command({"SLOWLOG", "LEN"}).integer;
  }
  EXPECT_EQ(logged, 0) << "a denial took over 1 ms of Redis time in every round";

  // Every command logged, to read the longest.
  Command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
  Command({"SLOWLOG", "RESET"});
  deny_the_worst();
  const redis::Reply entries = Command({"SLOWLOG", "GET", "10000"});
  int64_t longest = 0, checks = 0;
  for (const redis::Reply& e : entries.elements) {
    // id, timestamp, duration in µs, argv, ...
    if (e.elements.size() < 4 || e.elements[3].elements.empty()) continue;
    std::string command = e.elements[3].elements[0].str;
    std::transform(command.begin(), command.end(), command.begin(), ::toupper);
    if (command != "EVALSHA") continue;
    ++checks;
    longest = std::max(longest, e.elements[2].integer);
  }
  Command({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
  EXPECT_EQ(checks, 15);
  std::printf("sliding_log, %lld entries: the longest of 15 denials took %lld us of Redis time\n",
              static_cast<long long>(kEntries), static_cast<long long>(longest));
}

}  // namespace
}  // namespace sluice::testing
