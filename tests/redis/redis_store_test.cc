// RedisStore against a real redis-server: decisions and TTLs, reset, batches, input validation,
// key names, script cache loss and memory per key (CheckAll: check_all_test.cc).
#include "sluice/redis_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/algorithms.h"
#include "sluice/leasing_store.h"
#include "sluice/memory_store.h"
#include "sluice/timers.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

Limit MakeLimit(Algorithm algorithm, int64_t count, Duration period) {
  return *Limit::Create(algorithm, count, period);
}

// Redis Cluster's hash tag and slot of a key (CRC16/XMODEM of the tag, mod 16384).
std::string_view HashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int Slot(std::string_view key) {
  uint16_t crc = 0;
  for (unsigned char c : HashTag(key)) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
  }
  return crc & 16383;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

using RedisStoreBasics = RedisStoreTest;

TEST_F(RedisStoreBasics, CreateRejectsBadOptions) {
  auto brace = RedisStore::Create({.url = target_->url, .key_prefix = "app{1}:"});
  ASSERT_FALSE(brace.ok());
  EXPECT_EQ(brace.status().code(), StatusCode::kInvalidArgument);
  auto margin = RedisStore::Create({.url = target_->url, .expiry_margin = 999us});
  ASSERT_FALSE(margin.ok());
  EXPECT_EQ(margin.status().code(), StatusCode::kInvalidArgument);
  auto url = RedisStore::Create({.url = "http://localhost"});
  ASSERT_FALSE(url.ok());
  EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument);
  for (size_t coalesce_max : {0, 1025}) {
    auto coalesce = RedisStore::Create({.url = target_->url, .coalesce_max = coalesce_max});
    ASSERT_FALSE(coalesce.ok());
    EXPECT_EQ(coalesce.status().code(), StatusCode::kInvalidArgument);
  }
}

// With Redis TIME: a check admits, writes the state with a TTL just above reset_after, and
// the key is gone once it expires.
TEST_F(RedisStoreBasics, StateKeyLivesAsLongAsItsState) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  for (Algorithm algorithm : kAllAlgorithms) {
    const Limit limit = MakeLimit(algorithm, 3, 200ms);
    const std::string scope(AlgorithmName(algorithm));
    auto d = store->Check({.scope = scope, .limit = &limit, .key = "k", .cost = 2});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(d->allowed);
    EXPECT_EQ(d->limit, 3);
    EXPECT_EQ(d->remaining, 1) << scope;
    EXPECT_GT(d->reset_after, 0us);
    const auto keys = store->KeysOf(scope, "k");
    const int64_t pttl = Command({"PTTL", keys[0]}).integer;
    EXPECT_GT(pttl, 0) << scope;
    // ceil(reset_after in ms) + 1 ms margin, less what already passed.
    EXPECT_LE(pttl, (d->reset_after.count() + 999) / 1000 + 1) << scope;
    EXPECT_EQ(Command({"EXISTS", keys[1]}).integer, algorithm == Algorithm::kSlidingLog ? 1 : 0);
  }
}

TEST_F(RedisStoreBasics, PeeksAndDenialsWriteNothing) {
  ManualClock clock;
  auto store = MakeStore({.clock = &clock, .expiry_margin = 10min});
  ASSERT_NE(store, nullptr);
  for (Algorithm algorithm : kAllAlgorithms) {
    const Limit limit = MakeLimit(algorithm, 2, 10s);
    const std::string scope(AlgorithmName(algorithm));
    const auto keys = store->KeysOf(scope, "k");
    auto peek = store->Check({.scope = scope, .limit = &limit, .key = "k", .cost = 0});
    ASSERT_TRUE(peek.ok());
    EXPECT_TRUE(peek->allowed);
    EXPECT_EQ(peek->remaining, 2);
    EXPECT_EQ(Command({"EXISTS", keys[0], keys[1]}).integer, 0) << scope << ": a peek wrote";

    ASSERT_TRUE(store->Check({.scope = scope, .limit = &limit, .key = "k", .cost = 2})->allowed);
    const std::string before = Command({"DUMP", keys[0]}).str;
    clock.Advance(1ms);
    auto denied = store->Check({.scope = scope, .limit = &limit, .key = "k", .cost = 1});
    ASSERT_TRUE(denied.ok());
    EXPECT_FALSE(denied->allowed) << scope;
    EXPECT_GT(denied->retry_after, 0us);
    EXPECT_EQ(Command({"DUMP", keys[0]}).str, before) << scope << ": a denial wrote";
  }
}

TEST_F(RedisStoreBasics, ResetForgetsTheStateOfEveryAlgorithm) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  for (Algorithm algorithm : kAllAlgorithms) {
    const Limit limit = MakeLimit(algorithm, 2, 1h);
    const std::string scope(AlgorithmName(algorithm));
    const CheckRequest request{.scope = scope, .limit = &limit, .key = "k", .cost = 2};
    ASSERT_TRUE(store->Check(request)->allowed);
    ASSERT_FALSE(store->Check(request)->allowed);
    ASSERT_TRUE(store->Reset(scope, "k").ok());
    const auto keys = store->KeysOf(scope, "k");
    EXPECT_EQ(Command({"EXISTS", keys[0], keys[1]}).integer, 0) << scope;
    EXPECT_TRUE(store->Check(request)->allowed) << scope;
  }
  EXPECT_EQ(store->Reset("gcra", "").code(), StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreBasics, BatchDecidesInOrderAsMemoryDoes) {
  ManualClock clock;
  auto store = MakeStore({.clock = &clock, .expiry_margin = 10min});
  ASSERT_NE(store, nullptr);
  MemoryStore memory({.clock = &clock});
  const Limit gcra = MakeLimit(Algorithm::kGcra, 3, 1s);
  const Limit log = MakeLimit(Algorithm::kSlidingLog, 4, 1s);
  std::vector<CheckRequest> batch;
  std::mt19937 rng(7);
  const std::string keys[] = {"a", "b", "c"};
  for (int i = 0; i < 40; ++i) {
    const bool use_log = rng() % 2 == 0;
    batch.push_back({.scope = use_log ? "log" : "gcra",
                     .limit = use_log ? &log : &gcra,
                     .key = keys[rng() % 3],
                     .cost = static_cast<int64_t>(rng() % 3)});
  }
  batch[5].cost = -1;  // malformed: its error in place, the others decided
  batch[9].key = "";
  for (int round = 0; round < 3; ++round) {
    const auto expected = memory.CheckBatch(batch);
    const auto got = store->CheckBatch(batch);
    ASSERT_EQ(got.size(), batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      ASSERT_EQ(got[i].ok(), expected[i].ok()) << i;
      if (got[i].ok()) {
        EXPECT_EQ(*got[i], *expected[i]) << "round " << round << " request " << i;
      } else {
        EXPECT_EQ(got[i].status().code(), expected[i].status().code()) << i;
      }
    }
    clock.Advance(400ms);
  }
}

TEST_F(RedisStoreBasics, InvalidRequestsSendNothing) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit limit = MakeLimit(Algorithm::kGcra, 5, 1s);
  const std::string long_key(kMaxKeyBytes + 1, 'x');
  const std::string long_scope(kMaxScopeBytes + 1, 's');
  const int64_t calls_before = InfoNumber("commandstats", "cmdstat_evalsha:calls");
  const int64_t del_before = InfoNumber("commandstats", "cmdstat_del:calls");
  const std::vector<CheckRequest> bad = {
      {.scope = "s", .limit = &limit, .key = "", .cost = 1},
      {.scope = "s", .limit = &limit, .key = long_key, .cost = 1},
      {.scope = long_scope, .limit = &limit, .key = "k", .cost = 1},
      {.scope = "s", .limit = &limit, .key = "k", .cost = -1},
      {.scope = "s", .limit = &limit, .key = "k", .cost = 6},
      {.scope = "s", .limit = nullptr, .key = "k", .cost = 1},
  };
  for (const auto& r : bad) {
    auto d = store->Check(r);
    EXPECT_FALSE(d.ok());
  }
  EXPECT_EQ(store->Check(bad[4]).status().code(), StatusCode::kCostExceedsLimit);
  for (const auto& r : store->CheckBatch(bad)) EXPECT_FALSE(r.ok());
  EXPECT_EQ(store->CheckAll(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->CheckAll({}).status().code(), StatusCode::kInvalidArgument);
  const Limit other = MakeLimit(Algorithm::kFixedWindow, 5, 1s);
  const CheckRequest same_scope[] = {{.scope = "a", .limit = &limit, .key = "k"},
                                     {.scope = "a", .limit = &other, .key = "k"}};
  EXPECT_EQ(store->CheckAll(same_scope).status().code(), StatusCode::kInvalidArgument);
  const CheckRequest too_costly[] = {{.scope = "a", .limit = &limit, .key = "k"},
                                     {.scope = "b", .limit = &other, .key = "k", .cost = 9}};
  EXPECT_EQ(store->CheckAll(too_costly).status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_EQ(store->Reset("s", "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Reset("s", long_key).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Reset(long_scope, "k").code(), StatusCode::kInvalidArgument);
  std::promise<Status> reset;
  store->ResetAsync(long_scope, "k", [&](Status s) { reset.set_value(std::move(s)); });
  EXPECT_EQ(reset.get_future().get().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(InfoNumber("commandstats", "cmdstat_evalsha:calls"), calls_before);
  EXPECT_EQ(InfoNumber("commandstats", "cmdstat_del:calls"), del_before);
  EXPECT_TRUE(Scan(prefix_ + "*").empty());
}

// A give-back on Redis TIME: the units come back to the key the check wrote, which then lives as
// long as its state (ceil(reset_after in ms) + 1 ms margin), and is gone once the state is fresh.
TEST_F(RedisStoreBasics, GiveBackOnRedisTime) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const Limit limit = MakeLimit(algorithm, 10, 1h);  // one unit every 6 minutes
    const std::string scope(AlgorithmName(algorithm));
    const CheckRequest take{.scope = scope, .limit = &limit, .key = "k", .cost = 6};
    const CheckRequest peek{.scope = scope, .limit = &limit, .key = "k", .cost = 0};
    const std::string name = store->KeysOf(scope, "k")[0];
    ASSERT_TRUE(store->Check(take)->allowed);
    ASSERT_TRUE(store->GiveBack(scope, limit, "k", 4).ok()) << scope;
    const Result<Decision> after = store->Check(peek);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->remaining, 8) << scope;
    const int64_t pttl = Command({"PTTL", name}).integer;
    EXPECT_GT(pttl, 0) << scope;
    EXPECT_LE(pttl, 2 * 360'000 + 1) << scope;  // two units out
    std::promise<Status> all_back;
    store->GiveBackAsync(scope, limit, "k", 10,
                         [&](Status s) { all_back.set_value(std::move(s)); });
    EXPECT_TRUE(all_back.get_future().get().ok()) << scope;
    EXPECT_EQ(Command({"EXISTS", name}).integer, 0) << scope;
  }
}

// A give-back sent while Redis is stopped (SIGSTOP) and applied when it resumes, long after its
// apply_by: Redis gives back a unit less per emission interval past apply_by, by its own TIME,
// so what the meter refilled meanwhile is not returned on top.
TEST(RedisStoreGiveBack, AppliedLateByAStoppedRedisReturnsLess) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = RedisStore::Create({.url = server->url(), .timeout = 10s, .connect_timeout = 5s});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit limit = MakeLimit(Algorithm::kGcra, 100, 10s);  // one unit every 100 ms
  const CheckRequest take{.scope = "late", .limit = &limit, .key = "k", .cost = 60};
  ASSERT_TRUE((*store)->Check(take)->allowed);  // 40 left
  server->Pause();
  const auto stopped = std::chrono::steady_clock::now();
  std::promise<Status> given;
  (*store)->GiveBackAsync(
      "late", limit, "k", 40, [&](Status s) { given.set_value(std::move(s)); },
      SystemClock::Instance().now() + 50ms);
  std::this_thread::sleep_for(1s);
  server->Resume();
  ASSERT_TRUE(given.get_future().get().ok());
  const auto resumed = std::chrono::steady_clock::now() - stopped;
  const Result<Decision> after =
      (*store)->Check({.scope = "late", .limit = &limit, .key = "k", .cost = 0});
  ASSERT_TRUE(after.ok());
  // 40 + 40 given back, plus the refill since the take (at least 10 units: a second stopped),
  // less a unit per 100 ms past apply_by: what was refilled since the give-back was due. Some
  // slack for the time between the take and the give-back's send, and until the peek.
  EXPECT_GE(resumed, 1s);
  EXPECT_LE(after->remaining, 80 + 3) << "a late give-back returned the refill on top";
  EXPECT_GE(after->remaining, 80 - 1);
}

// The same through a LeasingStore, as `sluice serve` gives back a lease: it ends while Redis is
// stopped, and the give-back, sent then, is applied a second later. What Redis holds after is
// what the lease's give-back may return (leasing_store.h): its unused units less a unit per
// emission interval of its age up to when Redis applied it, not up to store_timeout after sending.
TEST(RedisStoreGiveBack, ALeaseGivenBackLateByAStoppedRedisReturnsLess) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = RedisStore::Create({.url = server->url(), .timeout = 10s, .connect_timeout = 5s});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  int64_t remaining = -1;
  {
    AsioTimers timers(io);
    LeasingStore leasing(**store, timers, LeasingStoreOptions{.store_timeout = 50ms});
    const Limit limit = MakeLimit(Algorithm::kGcra, 100, 10s);  // one unit every 100 ms
    // 40 taken without a lease, 50 by the lease: 10 left, far from full when the units return.
    ASSERT_TRUE(
        (*store)->Check({.scope = "lease", .limit = &limit, .key = "k", .cost = 40})->allowed);
    const auto taken = std::chrono::steady_clock::now();
    ASSERT_TRUE(leasing
                    .Check({.scope = "lease",
                            .limit = &limit,
                            .key = "k",
                            .lease = {.units = 50, .lifetime = 100ms}})
                    ->allowed);
    server->Pause();
    std::this_thread::sleep_for(1s);  // the lease ends, its give-back waits for Redis
    server->Resume();
    for (int i = 0; i < 500 && leasing.lease_stats().units_returned == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_GT(leasing.lease_stats().units_returned, 0u);
    const Result<Decision> after =
        (*store)->Check({.scope = "lease", .limit = &limit, .key = "k", .cost = 0});
    ASSERT_TRUE(after.ok());
    remaining = after->remaining;
    // 10 left, the refill since the take, and 49 unused less a unit per 100 ms from the take to
    // when Redis applied the give-back: about 10 + 49 - 1, give or take the time from the
    // give-back's application to the peek.
    const auto peeked = std::chrono::steady_clock::now() - taken;
    EXPECT_GE(peeked, 1s);
    EXPECT_LE(remaining, 10 + 49 + 2) << "the give-back returned what was refilled while late";
    EXPECT_GE(remaining, 10 + 49 - 3);
  }
  work.reset();
  runner.join();
}

// What GiveBack refuses is refused before Redis, with INVALID_ARGUMENT, changing nothing.
TEST_F(RedisStoreBasics, InvalidGiveBacksSendNothing) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit gcra = MakeLimit(Algorithm::kGcra, 5, 1h);
  ASSERT_TRUE(store->Check({.scope = "s", .limit = &gcra, .key = "k", .cost = 5})->allowed);
  const std::string name = store->KeysOf("s", "k")[0];
  const std::string before = Command({"GET", name}).str;
  const int64_t calls_before = InfoNumber("commandstats", "cmdstat_evalsha:calls");
  for (Algorithm algorithm :
       {Algorithm::kFixedWindow, Algorithm::kSlidingLog, Algorithm::kSlidingWindow}) {
    const Limit window = MakeLimit(algorithm, 5, 1h);
    EXPECT_EQ(store->GiveBack("s", window, "k", 1).code(), StatusCode::kInvalidArgument);
  }
  for (int64_t units : {int64_t{0}, int64_t{-1}, int64_t{6}}) {
    EXPECT_EQ(store->GiveBack("s", gcra, "k", units).code(), StatusCode::kInvalidArgument);
    std::promise<Status> async;
    store->GiveBackAsync("s", gcra, "k", units, [&](Status s) { async.set_value(std::move(s)); });
    EXPECT_EQ(async.get_future().get().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(store->GiveBack("s", gcra, "", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(InfoNumber("commandstats", "cmdstat_evalsha:calls"), calls_before);
  EXPECT_EQ(Command({"GET", name}).str, before);
  EXPECT_FALSE(store->Check({.scope = "s", .limit = &gcra, .key = "k"})->allowed);
}

TEST_F(RedisStoreBasics, KeysStayInTheirNamespaceAndHashTag) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit limit = MakeLimit(Algorithm::kSlidingLog, 1, 1h);
  // Pairs that would collide, or leave the tag, under a naive encoding.
  const std::vector<std::string> user_keys = {
      "a{b",   "a%7Bb", "a}b",   "a%7Db",          "{",       "}", "{}", "%", "%25", "a:b", "a",
      "b}:{c", "}{",    "x\0y"s, "\xff\xfe{\x01}", "k}suffix"};
  const std::vector<std::string> scopes = {"s", "s:", "s:{a", "s}"};
  for (const auto& scope : scopes) {
    for (const auto& key : user_keys) {
      const CheckRequest request{.scope = scope, .limit = &limit, .key = key};
      auto first = store->Check(request);
      ASSERT_TRUE(first.ok()) << first.status().ToString();
      // Allowed: no other (scope, key) shares its state.
      EXPECT_TRUE(first->allowed) << "scope '" << scope << "' key '" << key << "'";
      EXPECT_FALSE(store->Check(request)->allowed);
    }
  }
  std::set<std::string> tags;
  for (const auto& key : user_keys) {
    std::set<int> slots;
    for (const auto& scope : scopes) {
      for (const auto& name : store->KeysOf(scope, key)) {
        ASSERT_TRUE(name.starts_with(prefix_)) << name;
        EXPECT_EQ(PercentDecode(HashTag(name)), key) << name;
        slots.insert(Slot(name));
        tags.insert(std::string(HashTag(name)));
      }
    }
    EXPECT_EQ(slots.size(), 1u) << "the keys of '" << key << "' span slots";
  }
  EXPECT_EQ(tags.size(), user_keys.size());
  // Exactly the keys of those limiter keys exist, and nothing outside the prefix.
  std::set<std::string> expected;
  for (const auto& scope : scopes) {
    for (const auto& key : user_keys) {
      for (const auto& name : store->KeysOf(scope, key)) expected.insert(name);
    }
  }
  const auto scanned = Scan(prefix_ + "*");
  EXPECT_EQ(std::set<std::string>(scanned.begin(), scanned.end()), expected);
}

TEST_F(RedisStoreBasics, SurvivesLosingTheScriptCache) {
  auto store = MakeStore();
  ASSERT_NE(store, nullptr);
  const Limit limit = MakeLimit(Algorithm::kSlidingLog, 1000, 1s);
  const int64_t noscript_before = InfoNumber("errorstats", "errorstat_NOSCRIPT:count");
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, decided = 0, failed = 0;
  std::string first_error;
  constexpr int kChecks = 3000;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int i = 0; i < kChecks; ++i) {
    if (i % 1000 == 500) {
      ASSERT_EQ(Command({"SCRIPT", "FLUSH"}).str, "OK");
    }
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_until(lock, deadline, [&] { return in_flight < 32; }));
    ++in_flight;
    lock.unlock();
    const std::string key = "k" + std::to_string(i % 7);
    store->CheckAsync({.scope = "flush", .limit = &limit, .key = key}, [&](Result<Decision> d) {
      std::lock_guard lock(mu);
      ++decided;
      if (!d.ok()) {
        if (failed++ == 0) first_error = d.status().ToString();
      }
      --in_flight;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_until(lock, deadline, [&] { return in_flight == 0; }));
  EXPECT_EQ(decided, kChecks);
  EXPECT_EQ(failed, 0) << first_error;
  // The flushes did hit calls in flight, which the client reloaded.
  EXPECT_GT(InfoNumber("errorstats", "errorstat_NOSCRIPT:count"), noscript_before);
}

// The integer after "<field>" in an INFO section of `server`; 0 when absent.
int64_t InfoNumber(const RedisServer& server, const std::string& section, std::string_view field) {
  const std::string info = server.Cli({"INFO", section});
  const size_t at = info.find(field);
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + field.size()));
}

// SCRIPT FLUSH with more calls in flight than half the pending bound: each call that gets
// NOSCRIPT is sent again in its own pending slot, behind one SCRIPT LOAD, so the calls that keep
// coming while they drain are not refused. The server is paused while the first calls are sent,
// so that every one of them meets the flushed cache. Each check goes in its own call, as the
// counts below assume (a coalesced call's NOSCRIPT: CoalescedCheckTest).
TEST(RedisStoreScriptFlush, NearThePendingBoundNoDecisionFails) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = RedisStore::Create({.url = server->url(),
                                   .timeout = 5s,
                                   .connect_timeout = 5s,
                                   .connections_per_thread = 1,
                                   .max_pending_per_connection = 64,
                                   .coalesce_max = 1});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit limit = MakeLimit(Algorithm::kGcra, 1'000'000, 1s);
  constexpr int kInFlight = 60, kRounds = 5;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, decided = 0, failed = 0;
  std::string first_error;
  auto check = [&](int i) {
    {
      std::lock_guard lock(mu);
      ++in_flight;
    }
    const std::string key = "k" + std::to_string(i % 7);
    (*store)->CheckAsync({.scope = "flush", .limit = &limit, .key = key}, [&](Result<Decision> d) {
      std::lock_guard lock(mu);
      ++decided;
      if (!d.ok() && failed++ == 0) first_error = d.status().ToString();
      --in_flight;
      cv.notify_all();
    });
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_EQ(server->Cli({"SCRIPT", "FLUSH"}), "OK");
    server->Pause();
    for (int i = 0; i < kInFlight; ++i) check(i);
    server->Resume();
    // As many again, each as soon as an earlier one is answered.
    for (int i = 0; i < kInFlight; ++i) {
      std::unique_lock lock(mu);
      ASSERT_TRUE(cv.wait_until(lock, deadline, [&] { return in_flight < kInFlight; }));
      lock.unlock();
      check(i);
    }
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_until(lock, deadline, [&] { return in_flight == 0; }));
  }
  EXPECT_EQ(decided, 2 * kInFlight * kRounds);
  EXPECT_EQ(failed, 0) << first_error;
  EXPECT_EQ(InfoNumber(*server, "errorstats", "errorstat_NOSCRIPT:count="), kInFlight * kRounds);
  EXPECT_EQ(InfoNumber(*server, "commandstats", "cmdstat_script|load:calls="), kRounds);
}

// MEMORY USAGE of one limiter key's Redis keys, filled to the limit one unit at a time, with
// key names of a typical length ("sluice:api:{user:42}").
TEST_F(RedisStoreBasics, MemoryPerKey) {
  ManualClock clock;
  prefix_ = "sluice:";
  auto store = MakeStore({.clock = &clock, .expiry_margin = 1min});
  ASSERT_NE(store, nullptr);
  for (int64_t count : {100, 1000}) {
    for (Algorithm algorithm : kAllAlgorithms) {
      const Limit limit = MakeLimit(algorithm, count, 1h);
      for (int64_t i = 0; i < count; ++i) {
        clock.Advance(1us);
        auto d = store->Check({.scope = "api", .limit = &limit, .key = "user:42"});
        ASSERT_TRUE(d.ok() && d->allowed) << AlgorithmName(algorithm) << " " << i;
      }
      int64_t bytes = 0;
      for (const auto& name : store->KeysOf("api", "user:42")) {
        bytes += Command({"MEMORY", "USAGE", name, "SAMPLES", "0"}).integer;
      }
      std::printf("MEMORY USAGE %s limit=%lld: %lld bytes\n",
                  std::string(AlgorithmName(algorithm)).c_str(), static_cast<long long>(count),
                  static_cast<long long>(bytes));
      if (algorithm != Algorithm::kSlidingLog && algorithm != Algorithm::kSlidingWindow) {
        EXPECT_LE(bytes, 100) << AlgorithmName(algorithm);
      }
      ASSERT_TRUE(store->Reset("api", "user:42").ok());
    }
  }
}

}  // namespace
}  // namespace sluice::testing
