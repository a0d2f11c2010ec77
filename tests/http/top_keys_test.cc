#include "http/top_keys.h"

#include <gtest/gtest.h>
#include <malloc.h>

// ASan replaces malloc and keeps its own count of the bytes in use, which glibc's mallinfo2 does
// not see. TSan's allocator counts whole size classes, not the bytes asked for: no measure of
// ours there (see ARuleTakesAtMostRuleBytes).
#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_ASAN 1
#elif defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_ASAN 1
#elif __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
#endif
#endif
#if SLUICE_ASAN
// From sanitizer/allocator_interface.h, which GCC does not install.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/store.h"

namespace sluice::http {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

#if !SLUICE_TSAN
// The bytes the process has allocated and not freed.
size_t HeapInUse() {
#if SLUICE_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#endif
}
#endif

// The true denials per key, for comparing with the sketch's estimates.
using Truth = std::map<std::string, uint64_t>;

// A clock at the start of a minute, so slots begin where the tests expect.
Time MinuteStart() { return Time(minutes(28'333'333)); }

struct BoundCheck {
  uint64_t n = 0;                  // denials in the window
  uint64_t largest_overcount = 0;  // max over reported keys of (count - true count)
  uint64_t top10_overcount = 0;    // the same over the 10 keys truly denied most
};

// Checks every guarantee of the sketch on `report` (which must list every key merged) against
// the true counts, and returns what was measured.
BoundCheck ExpectGuarantees(const TopKeysReport& report, const Truth& truth, size_t k) {
  BoundCheck measured;
  for (const auto& [key, count] : truth) measured.n += count;
  EXPECT_EQ(report.denied, measured.n);
  EXPECT_EQ(report.max_error, measured.n / k);
  std::map<std::string, const TopKey*> reported;
  for (const TopKey& entry : report.keys) {
    const auto it = truth.find(entry.key);
    const uint64_t real = it == truth.end() ? 0 : it->second;
    EXPECT_GE(entry.denied, real) << entry.key;
    EXPECT_LE(entry.denied - entry.error, real) << entry.key;
    EXPECT_LE(entry.error, report.max_error) << entry.key;
    measured.largest_overcount = std::max(measured.largest_overcount, entry.denied - real);
    reported[entry.key] = &entry;
  }
  std::vector<std::pair<uint64_t, std::string>> heaviest;
  for (const auto& [key, count] : truth) heaviest.emplace_back(count, key);
  std::sort(heaviest.rbegin(), heaviest.rend());
  heaviest.resize(std::min<size_t>(heaviest.size(), 10));
  for (const auto& [count, key] : heaviest) {
    if (reported.contains(key)) {
      measured.top10_overcount = std::max(measured.top10_overcount, reported[key]->denied - count);
    }
  }
  for (const auto& [key, count] : truth) {
    if (count > measured.n / k) {
      EXPECT_TRUE(reported.contains(key)) << key << " x" << count;
    }
  }
  for (size_t i = 1; i < report.keys.size(); ++i) {
    EXPECT_GE(report.keys[i - 1].denied, report.keys[i].denied);
  }
  return measured;
}

void Print(const std::string& stream, const BoundCheck& m, size_t k) {
  std::cout << "[ measured ] " << stream << ": N=" << m.n << ", k=" << k
            << ", bound N/k=" << m.n / k << ", largest overcount " << m.largest_overcount
            << " (of the 10 keys denied most: " << m.top10_overcount << ")\n";
}

// Draws keys "z<rank>" with probability proportional to 1/rank^s.
class Zipf {
 public:
  Zipf(size_t keys, double s, uint64_t seed) : random_(seed) {
    double total = 0;
    for (size_t rank = 1; rank <= keys; ++rank) {
      total += 1.0 / std::pow(static_cast<double>(rank), s);
      cdf_.push_back(total);
    }
    for (double& c : cdf_) c /= total;
  }
  std::string Next() {
    const double u = std::uniform_real_distribution<double>(0, 1)(random_);
    const size_t rank = std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin() + 1;
    return "z" + std::to_string(std::min(rank, cdf_.size()));
  }

 private:
  std::mt19937_64 random_;
  std::vector<double> cdf_;
};

class TopKeysTest : public ::testing::Test {
 protected:
  void Deny(TopKeys& top, std::string_view rule, const std::string& key, Truth& truth) {
    top.Record(rule, key);
    ++truth[key];
  }

  ManualClock clock_{MinuteStart()};
};

TEST_F(TopKeysTest, CountsExactlyWhileKeysFitInTheCounters) {
  TopKeys top(clock_, {.counters_per_rule = 8});
  Truth truth;
  for (int i = 0; i < 5; ++i) Deny(top, "api", "heavy", truth);
  for (int i = 0; i < 3; ++i) Deny(top, "api", "middle", truth);
  Deny(top, "api", "light", truth);
  Deny(top, "login", "other", truth);

  const TopKeysReport report = top.Top("api", 10);
  ASSERT_EQ(report.keys.size(), 3u);
  EXPECT_EQ(report.keys[0].key, "heavy");
  EXPECT_EQ(report.keys[0].denied, 5u);
  EXPECT_EQ(report.keys[1].key, "middle");
  EXPECT_EQ(report.keys[2].key, "light");
  for (const TopKey& key : report.keys) EXPECT_EQ(key.error, 0u);
  EXPECT_EQ(report.denied, 9u);
  EXPECT_TRUE(report.tracked);
  EXPECT_EQ(top.Top("api", 1).keys.size(), 1u);
  EXPECT_EQ(top.Top("login", 10).keys.at(0).key, "other");

  const TopKeysReport none = top.Top("never-denied", 10);
  EXPECT_TRUE(none.tracked);
  EXPECT_TRUE(none.keys.empty());
  EXPECT_EQ(none.denied, 0u);
  EXPECT_EQ(none.window, minutes(4));
}

TEST_F(TopKeysTest, ErrorBoundHoldsOnZipfStreams) {
  for (const double s : {0.8, 1.1, 1.5}) {
    const size_t k = 64;
    TopKeys top(clock_, {.counters_per_rule = k});
    Truth truth;
    Zipf zipf(20'000, s, 42);
    for (int i = 0; i < 200'000; ++i) Deny(top, "api", zipf.Next(), truth);
    const TopKeysReport report = top.Top("api", k);
    const BoundCheck measured = ExpectGuarantees(report, truth, k);
    Print("zipf s=" + std::to_string(s).substr(0, 3), measured, k);
    // The heaviest keys stand well apart on these streams: the sketch ranks them as they are.
    std::vector<std::pair<uint64_t, std::string>> ranked;
    for (const auto& [key, count] : truth) ranked.emplace_back(count, key);
    std::sort(ranked.rbegin(), ranked.rend());
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(report.keys[i].key, ranked[i].second) << "s=" << s;
  }
}

TEST_F(TopKeysTest, ErrorBoundHoldsOnAdversarialStreams) {
  const size_t k = 16;
  std::map<std::string, std::vector<std::string>> streams;
  // k+1 keys in turn: every arrival evicts the counter of the key that comes next.
  for (int i = 0; i < 17 * 500; ++i)
    streams["round robin of k+1"].push_back("r" + std::to_string(i % 17));
  // Every key distinct: each counter ends at about N/k, all of it error.
  for (int i = 0; i < 10'000; ++i) streams["all distinct"].push_back("d" + std::to_string(i));
  // A heavy key seen early, then a flood of distinct keys to push it out, then a few more times.
  {
    auto& s = streams["heavy key then flood"];
    for (int i = 0; i < 900; ++i) s.push_back("heavy");
    for (int i = 0; i < 9'000; ++i) s.push_back("flood" + std::to_string(i));
    for (int i = 0; i < 100; ++i) s.push_back("heavy");
  }
  // Heavy keys interleaved with churn so each gets evicted between its arrivals.
  {
    auto& s = streams["heavy keys hidden in churn"];
    for (int i = 0; i < 20'000; ++i) {
      s.push_back(i % 3 == 0 ? "h" + std::to_string(i % 5) : "c" + std::to_string(i));
    }
  }
  for (const auto& [name, stream] : streams) {
    TopKeys top(clock_, {.counters_per_rule = k});
    Truth truth;
    for (const std::string& key : stream) Deny(top, "api", key, truth);
    const BoundCheck measured = ExpectGuarantees(top.Top("api", k), truth, k);
    Print(name, measured, k);
  }
}

TEST_F(TopKeysTest, ErrorBoundHoldsAcrossSlots) {
  // Five slots of a minute, each a Zipf stream over keys of its own but for "steady", denied
  // in every minute less than the heaviest key of that minute and more than any in all.
  const size_t k = 32;
  TopKeys top(clock_, {.counters_per_rule = k});
  Truth truth;
  for (int minute = 0; minute < 5; ++minute) {
    Zipf zipf(5'000, 1.0, 100 + minute);
    for (int i = 0; i < 40'000; ++i) {
      Deny(top, "api", i % 20 == 0 ? "steady" : zipf.Next() + "-" + std::to_string(minute), truth);
    }
    clock_.Advance(minutes(1));
  }
  clock_.Advance(-seconds(1));  // still in the fifth slot: the whole stream is in the window
  const TopKeysReport report = top.Top("api", 5 * k);
  const BoundCheck measured = ExpectGuarantees(report, truth, k);
  Print("five slots of zipf", measured, k);
  EXPECT_EQ(truth["steady"], 10'000u);
  EXPECT_GT(truth["z1-0"], 4'000u);
  EXPECT_EQ(report.window, minutes(5) - seconds(1));
}

TEST_F(TopKeysTest, SlotsLeaveTheWindowAsTimePasses) {
  TopKeys top(clock_);  // 5 slots of a minute
  top.Record("api", "first");
  clock_.Advance(minutes(1) + seconds(30));
  top.Record("api", "second");
  top.Record("api", "second");

  TopKeysReport report = top.Top("api", 10);
  EXPECT_EQ(report.denied, 3u);
  EXPECT_EQ(report.window, minutes(4) + seconds(30));
  ASSERT_EQ(report.keys.size(), 2u);

  // Minute 5 begins: the slot of minute 0 is out of the window, minute 1's is still in.
  clock_.Set(MinuteStart() + minutes(5));
  report = top.Top("api", 10);
  EXPECT_EQ(report.denied, 2u);
  ASSERT_EQ(report.keys.size(), 1u);
  EXPECT_EQ(report.keys[0].key, "second");
  EXPECT_EQ(report.window, minutes(4));

  // A denial now reuses the ring's place of minute 0: nothing of it comes back.
  top.Record("api", "third");
  report = top.Top("api", 10);
  EXPECT_EQ(report.denied, 3u);
  EXPECT_EQ(report.keys.size(), 2u);

  clock_.Set(MinuteStart() + minutes(10));
  report = top.Top("api", 10);
  EXPECT_EQ(report.denied, 0u);
  EXPECT_TRUE(report.keys.empty());
}

TEST_F(TopKeysTest, AClockThatStepsBackCountsInTheNewestSlot) {
  TopKeys top(clock_);
  clock_.Advance(minutes(2));
  top.Record("api", "later");
  clock_.Advance(-minutes(2));
  top.Record("api", "earlier");
  const TopKeysReport report = top.Top("api", 10);
  EXPECT_EQ(report.denied, 2u);
  EXPECT_EQ(report.keys.size(), 2u);
}

TEST_F(TopKeysTest, EachSlotHoldsAtMostKKeys) {
  const size_t k = 8;
  TopKeys top(clock_, {.counters_per_rule = k, .slots = 3});
  for (int minute = 0; minute < 3; ++minute) {
    for (int i = 0; i < 1'000; ++i)
      top.Record("api", "m" + std::to_string(minute) + "-" + std::to_string(i));
    clock_.Advance(minutes(1));
  }
  clock_.Advance(-seconds(1));
  EXPECT_EQ(top.Top("api", 1'000).keys.size(), 3 * k);  // k per slot, no key in two slots
}

TEST_F(TopKeysTest, KeysBeyondTheLongestAcceptedAreCountedByTheirPrefix) {
  TopKeys top(clock_);
  const std::string base(kMaxKeyBytes, 'x');
  top.Record("api", base + "a");
  top.Record("api", base + "b");
  const TopKeysReport report = top.Top("api", 10);
  ASSERT_EQ(report.keys.size(), 1u);
  EXPECT_EQ(report.keys[0].key, base);
  EXPECT_EQ(report.keys[0].denied, 2u);
}

TEST_F(TopKeysTest, RulesBeyondTheMemoryCapAreNotTracked) {
  TopKeysOptions options{.counters_per_rule = 4, .slots = 2};
  options.max_bytes = 2 * TopKeys::RuleBytes(options) + TopKeys::RuleBytes(options) / 2;
  TopKeys top(clock_, options);
  top.Record("a", "k");
  top.Record("b", "k");
  EXPECT_FALSE(top.Top("c", 10).tracked) << "no room left for a third rule";
  top.Record("c", "k");
  EXPECT_EQ(top.reserved_bytes(), 2 * TopKeys::RuleBytes(options));
  EXPECT_EQ(top.Top("a", 10).denied, 1u);
  const TopKeysReport untracked = top.Top("c", 10);
  EXPECT_FALSE(untracked.tracked);
  EXPECT_EQ(untracked.denied, 0u);
  EXPECT_TRUE(top.Top("d", 10).keys.empty());
  EXPECT_FALSE(top.Top("d", 10).tracked);

  // A reload drops rule a: its memory goes to the next rule denied.
  top.Retain([](std::string_view rule) { return rule != "a"; });
  EXPECT_EQ(top.reserved_bytes(), TopKeys::RuleBytes(options));
  EXPECT_EQ(top.Top("a", 10).denied, 0u);
  top.Record("c", "k");
  EXPECT_TRUE(top.Top("c", 10).tracked);
  EXPECT_EQ(top.Top("c", 10).denied, 1u);
  EXPECT_EQ(top.reserved_bytes(), 2 * TopKeys::RuleBytes(options));
}

#if !SLUICE_TSAN
// The heap a rule's sketches take, measured, is within RuleBytes on the worst stream for memory:
// every key distinct and of the longest length, in every slot. (Not in the TSan build: its
// allocator rounds every block up to a size class, which is not what the process would use.)
TEST_F(TopKeysTest, ARuleTakesAtMostRuleBytes) {
  const TopKeysOptions options{.counters_per_rule = 64, .slots = 5};
  TopKeys top(clock_, options);
  std::vector<std::string> keys;
  for (int i = 0; i < 2'000; ++i) {
    std::string key = std::to_string(i) + "-";
    key.resize(kMaxKeyBytes - i % 3, 'k');  // lengths vary, so strings are re-allocated
    keys.push_back(std::move(key));
  }
  top.Record("warm-up", "k");  // the map's node, outside the measure
  const size_t before = HeapInUse();
  for (size_t slot = 0; slot < options.slots; ++slot) {
    for (const std::string& key : keys) top.Record("api", key);
    clock_.Advance(minutes(1));
  }
  const size_t used = HeapInUse() - before;
  std::cout << "[ measured ] heap of one rule: " << used << " bytes; RuleBytes "
            << TopKeys::RuleBytes(options) << "\n";
  EXPECT_LE(used, TopKeys::RuleBytes(options));
  EXPECT_GT(used, TopKeys::RuleBytes(options) / 2) << "the estimate is not far above the truth";
}
#endif

TEST_F(TopKeysTest, ConcurrentDenialsAreAllCounted) {
  TopKeys top(clock_, {.counters_per_rule = 16});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20'000;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (const char* rule : {"a", "b", "c"}) EXPECT_LE(top.Top(rule, 16).keys.size(), 16u);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&top, t] {
      const std::string rules[] = {"a", "b", "c"};
      for (int i = 0; i < kPerThread; ++i) {
        top.Record(rules[i % 3], "key" + std::to_string((i * 7 + t) % 50));
      }
    });
  }
  for (auto& w : writers) w.join();
  done.store(true);
  reader.join();
  uint64_t total = 0;
  for (const char* rule : {"a", "b", "c"}) total += top.Top(rule, 16).denied;
  EXPECT_EQ(total, uint64_t{kThreads} * kPerThread);
}

}  // namespace
}  // namespace sluice::http
