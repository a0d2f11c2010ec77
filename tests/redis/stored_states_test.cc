// States put in Redis by hand, which traces through the store do not reach quickly. Keys written
// by the previous version of the scripts, still there after an upgrade, are read safely: a
// sliding_log of "time:cost" members with its total is rewritten in today's form on first use, a
// sliding_window state without its latest admission and a fixed_window state holding its window's
// start decide as the state the same admissions leave in MemoryStore. A sliding_log whose running
// counts wrap around 2^32 (after that many units on one key) decides as MemoryStore's; one that
// lost the count of the units gone (its auxiliary key evicted) admits nothing until its oldest
// entry leaves.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sluice/memory_store.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

// A tag byte then little-endian fields of the given widths, as the scripts pack a state.
std::string Packed(char tag, std::initializer_list<std::pair<int64_t, int>> fields) {
  std::string value(1, tag);
  for (auto [v, bytes] : fields) {
    for (int i = 0; i < bytes; ++i) value.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  return value;
}

struct Admission {
  int64_t at;
  int64_t cost;
};

class StoredStates : public RedisStoreTest {
 protected:
  void SetUp() override {
    RedisStoreTest::SetUp();
    if (HasFatalFailure()) return;
    redis_ = MakeStore({.clock = &clock_, .expiry_margin = 10min});
    ASSERT_NE(redis_, nullptr);
  }

  // The admissions go to MemoryStore at their times; Redis is given `earlier_state` as the
  // previous version left it. From `from` on, both stores must decide `trace` alike.
  void ExpectSameDecisions(const Limit& limit, const std::vector<Admission>& admissions,
                           int64_t from, const std::vector<Admission>& trace) {
    for (const Admission& a : admissions) {
      clock_.Set(Time(Duration(a.at)));
      ASSERT_TRUE(memory_.Check(Request(limit, a.cost))->allowed);
    }
    clock_.Set(Time(Duration(from)));
    for (size_t i = 0; i < trace.size(); ++i) {
      clock_.Advance(Duration(trace[i].at));
      const Result<Decision> want = memory_.Check(Request(limit, trace[i].cost));
      const Result<Decision> got = redis_->Check(Request(limit, trace[i].cost));
      ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
      ASSERT_EQ(*want, *got) << AlgorithmName(limit.algorithm()) << " step " << i << ": allowed "
                             << want->allowed << "/" << got->allowed << " remaining "
                             << want->remaining << "/" << got->remaining << " retry_after "
                             << want->retry_after.count() << "/" << got->retry_after.count();
    }
  }

  CheckRequest Request(const Limit& limit, int64_t cost) const {
    return {.scope = "up", .limit = &limit, .key = "k", .cost = cost};
  }
  std::string Key(int n) const { return redis_->KeysOf("up", "k")[n]; }

  ManualClock clock_;
  MemoryStore memory_{MemoryStoreOptions{.clock = &clock_}};
  std::unique_ptr<RedisStore> redis_;
};

// The trace after the upgrade: denials, a peek, admissions as entries leave, a long pause.
const std::vector<Admission> kAfterUpgrade = {{0, 1},         {0, 0},         {1, 3},
                                              {2'500'000, 1}, {1'000'000, 2}, {0, 1},
                                              {6'000'000, 4}, {0, 1},         {30'000'000, 1}};

TEST_F(StoredStates, SlidingLogIsRewrittenOnFirstUse) {
  const Limit limit = *Limit::Create(Algorithm::kSlidingLog, 10, 10s);
  const int64_t t = 1'700'000'000'000'000;
  // Two entries already out of the window when the new version first sees the log.
  const std::vector<Admission> admissions = {
      {t, 2}, {t + 1'000'000, 1}, {t + 4'000'000, 3}, {t + 7'000'000, 1}, {t + 9'000'000, 2}};
  int64_t total = 0;
  for (const Admission& a : admissions) {
    Command({"ZADD", Key(0), std::to_string(a.at),
             std::to_string(a.at) + ":" + std::to_string(a.cost)});
    total += a.cost;
  }
  Command({"PEXPIRE", Key(0), "600000"});
  Command({"SET", Key(1), std::to_string(total), "PX", "600000"});
  ExpectSameDecisions(limit, admissions, t + 11'500'000, kAfterUpgrade);
  for (const redis::Reply& member : Command({"ZRANGE", Key(0), "0", "-1"}).elements) {
    EXPECT_EQ(member.str.find(':'), std::string::npos) << "not rewritten: " << member.str;
  }
}

TEST_F(StoredStates, SlidingLogWhoseRunningCountsWrapAround) {
  const Limit limit = *Limit::Create(Algorithm::kSlidingLog, 10, 10s);
  const int64_t t = 1'700'000'000'000'000;
  const int64_t wrap = int64_t{1} << 32;
  // 4294967290 units have left the log; then 3 at t (running count 4294967293) and 4 at t + 2 s
  // (running count 4294967297, stored as 1).
  Command({"ZADD", Key(0), std::to_string(t), std::to_string(wrap - 3),
           std::to_string(t + 2'000'000), "1"});
  Command({"PEXPIRE", Key(0), "600000"});
  Command({"SET", Key(1), std::to_string(wrap - 6), "PX", "600000"});
  ExpectSameDecisions(limit, {{t, 3}, {t + 2'000'000, 4}}, t + 3'000'000, kAfterUpgrade);
}

TEST_F(StoredStates, SlidingLogThatLostTheCountOfUnitsGoneWaitsForItsOldestEntry) {
  const Limit limit = *Limit::Create(Algorithm::kSlidingLog, 10, 10s);
  const int64_t t = 1'700'000'000'000'000;
  clock_.Set(Time(Duration(t)));
  ASSERT_TRUE(redis_->Check(Request(limit, 2))->allowed);
  clock_.Advance(1s);
  ASSERT_TRUE(redis_->Check(Request(limit, 1))->allowed);
  Command({"DEL", Key(1)});
  clock_.Advance(1s);
  Result<Decision> d = redis_->Check(Request(limit, 1));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(d->retry_after, 8s);  // when the entry at t leaves
  clock_.Set(Time(Duration(t + 10'000'000 - 1)));
  EXPECT_FALSE(redis_->Check(Request(limit, 1))->allowed);
  clock_.Advance(1us);
  d = redis_->Check(Request(limit, 9));  // the unit of t + 1 s still counts
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0);
}

TEST_F(StoredStates, SlidingWindowWithoutItsLatestAdmission) {
  const Limit limit = *Limit::Create(Algorithm::kSlidingWindow, 10, 10s);
  const int64_t period = 10'000'000;
  const int64_t start = 1'700'000'000'000'000 / period * period;
  // 6 units in the previous window, 3 in this one: start, previous, current.
  Command({"SET", Key(0), Packed('w', {{start, 7}, {6, 4}, {3, 4}}), "PX", "600000"});
  ExpectSameDecisions(limit, {{start - 1, 6}, {start, 3}}, start + 2'000'000, kAfterUpgrade);
}

TEST_F(StoredStates, FixedWindowHoldingItsWindowsStart) {
  const Limit limit = *Limit::Create(Algorithm::kFixedWindow, 10, 10s);
  const int64_t period = 10'000'000;
  const int64_t start = 1'700'000'000'000'000 / period * period;
  Command({"SET", Key(0), Packed('f', {{start, 7}, {8, 4}}), "PX", "600000"});
  ExpectSameDecisions(limit, {{start + 1'000'000, 8}}, start + 2'000'000, kAfterUpgrade);
}

}  // namespace
}  // namespace sluice::testing
