// Redis's error replies by what they mean, on a real redis-server, through a ResilientStore whose
// rules fail open: a full Redis (maxmemory reached, noeviction) is refused (RESOURCE_EXHAUSTED),
// never admitted by fail_open, and opens no breaker; a key holding another type than its script
// keeps there fails that key's checks alone (INTERNAL), coalesced with others or not, and the
// other rules of the instance go on being decided exactly by Redis.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/redis_store.h"
#include "sluice/resilient_store.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;
using Steady = std::chrono::steady_clock;

// A deadline no loaded machine misses: an outage here would be the failure policy's to decide.
std::unique_ptr<RedisStore> Connect(const RedisServer& server, Duration timeout = 5s) {
  auto store =
      RedisStore::Create({.url = server.url(), .timeout = timeout, .connections_per_thread = 1});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

// The calls Redis ran of a command, from INFO commandstats ("cmdstat_evalsha:calls=12,...").
int64_t CommandCalls(const RedisServer& server, const std::string& command) {
  const std::string stats = server.Cli({"INFO", "commandstats"});
  const std::string field = "cmdstat_" + command + ":calls=";
  const size_t at = stats.find(field);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + field.size()));
}

// Admits `key` of sliding_log `limiter` once, then puts a list where the script keeps the count
// of the units that left the log: every later check of the key reads it, and gets WRONGTYPE.
void CorruptLogCount(const RedisServer& server, const RedisStore& store, const Limiter& limiter,
                     const std::string& key) {
  ASSERT_TRUE(limiter.Check(key).ok());
  const std::vector<std::string> keys = store.KeysOf(limiter.name(), key);
  ASSERT_EQ(keys.size(), 2u);
  server.Cli({"DEL", keys[1]});
  server.Cli({"RPUSH", keys[1], "not a count"});
  server.Cli({"PEXPIRE", keys[1], "3600000"});
}

// Distinct keys of `limiter`, 1000 to a batch, until a check is refused for a full Redis (true),
// fails otherwise, or 200 batches or 20 s have passed (false).
bool FillUntilFull(const Limiter& limiter) {
  const auto until = Steady::now() + 20s;
  std::vector<std::string> keys(1000);
  std::vector<KeyCost> batch(keys.size());
  for (int b = 0; b < 200 && Steady::now() < until; ++b) {
    for (size_t i = 0; i < keys.size(); ++i) {
      keys[i] = "flood:" + std::to_string(b) + ":" + std::to_string(i);
      batch[i] = {.key = keys[i]};
    }
    for (const auto& r : limiter.CheckBatch(batch)) {
      if (!r.ok()) return r.status().message().find("OOM") != std::string::npos;
    }
  }
  return false;
}

// Lowers maxmemory below the memory Redis uses now (9/10 of it). A flood's batch is refused
// once its query buffer takes Redis past maxmemory; the buffer then freed, a small write would fit
// again until the flood's next batch. This holds the store full between batches, as a flood that
// goes on does.
void HoldFull(const RedisServer& server) {
  const std::string memory = server.Cli({"INFO", "memory"});
  const std::string field = "used_memory:";
  const size_t at = memory.find(field);
  ASSERT_NE(at, std::string::npos) << memory;
  const int64_t used = std::stoll(memory.substr(at + field.size()));
  server.Cli({"CONFIG", "SET", "maxmemory", std::to_string(used / 10 * 9)});
}

struct Outcomes {
  int allowed = 0;
  int denied = 0;
  int fail_open = 0;
  std::vector<Status> errors;
};

void Count(Outcomes& o, const Result<Decision>& d) {
  if (!d.ok()) {
    o.errors.push_back(d.status());
  } else if (d->source == DecisionSource::kFailOpen) {
    ++o.fail_open;
  } else {
    ++(d->allowed ? o.allowed : o.denied);
  }
}

TEST(RedisErrorReplies, AFullRedisIsRefusedNeverAdmittedByFailOpenAndOpensNoBreaker) {
  auto server = RedisServer::Start({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
  ASSERT_NE(server, nullptr);
  auto redis = Connect(*server);
  ASSERT_NE(redis, nullptr);
  ResilientStore store(*redis);
  // The flood's own client.
  auto flood_redis = Connect(*server);
  ASSERT_NE(flood_redis, nullptr);
  const Limiter flood(*flood_redis, "flood", *Limit::Create(Algorithm::kSlidingWindow, 100, 1h));
  ASSERT_TRUE(FillUntilFull(flood)) << server->Cli({"INFO", "memory"});
  HoldFull(*server);

  // A rule of another client, failing open: every check refused as the store is full.
  const Limiter victim(store, "victim", *Limit::Create(Algorithm::kGcra, 5, 1s),
                       FailurePolicy::kFailOpen);
  Outcomes outcomes;
  for (int i = 0; i < 50; ++i) Count(outcomes, victim.Check("user:" + std::to_string(i % 5)));
  EXPECT_EQ(outcomes.fail_open, 0);
  EXPECT_EQ(outcomes.allowed + outcomes.denied, 0);
  ASSERT_EQ(outcomes.errors.size(), 50u);
  for (const Status& error : outcomes.errors) {
    EXPECT_EQ(error.code(), StatusCode::kResourceExhausted) << error.ToString();
  }
  EXPECT_EQ(store.stats().breaker_opens, 0u);
  EXPECT_EQ(store.stats().fail_open, 0u);

  // Room again: decided by Redis, exactly.
  server->Cli({"FLUSHALL"});
  server->Cli({"CONFIG", "SET", "maxmemory", "4mb"});
  Outcomes after;
  for (int i = 0; i < 8; ++i) Count(after, victim.Check("after"));
  EXPECT_EQ(after.allowed, 5);
  EXPECT_EQ(after.denied, 3);
  EXPECT_TRUE(after.errors.empty());
}

TEST(RedisErrorReplies, AKeyOfTheWrongTypeFailsItsChecksAloneAndOpensNoBreaker) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto redis = Connect(*server);
  ASSERT_NE(redis, nullptr);
  ResilientStore store(*redis);
  const Limiter log(store, "log", *Limit::Create(Algorithm::kSlidingLog, 5, 1h),
                    FailurePolicy::kFailOpen);
  const Limiter other(store, "other", *Limit::Create(Algorithm::kFixedWindow, 5, 1h),
                      FailurePolicy::kFailOpen);
  CorruptLogCount(*server, *redis, log, "corrupt");

  // Runs of checks of the corrupted key longer than the failures that open a breaker (5).
  Outcomes corrupt, fine;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 6; ++i) Count(corrupt, log.Check("corrupt"));
    for (int i = 0; i < 4; ++i) Count(fine, other.Check("k"));
  }
  EXPECT_EQ(corrupt.fail_open, 0);
  EXPECT_EQ(corrupt.errors.size(), 60u);
  for (const Status& error : corrupt.errors) {
    EXPECT_EQ(error.code(), StatusCode::kInternal) << error.ToString();
    EXPECT_NE(error.message().find("WRONGTYPE"), std::string::npos) << error.ToString();
  }
  EXPECT_EQ(fine.allowed, 5);
  EXPECT_EQ(fine.denied, 35);
  EXPECT_EQ(fine.fail_open, 0);
  EXPECT_TRUE(fine.errors.empty());
  EXPECT_EQ(store.stats().breaker_opens, 0u);
  EXPECT_EQ(store.stats().store_errors, 0u);
}

// Checks of one algorithm in flight together are decided by one check_many.lua call: the check
// of the corrupted key gets its error, the others their decisions, each as if alone.
TEST(RedisErrorReplies, AKeyOfTheWrongTypeFailsOnlyItsOwnChecksInACoalescedCall) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto redis = Connect(*server);
  ASSERT_NE(redis, nullptr);
  const Limit limit = *Limit::Create(Algorithm::kSlidingLog, 5, 1h);
  const Limiter log(*redis, "log", limit);
  CorruptLogCount(*server, *redis, log, "corrupt");

  // Bursts of checks sent at once; coalescing depends on how the I/O thread keeps up, so bursts
  // are sent (each on keys of its own) until one was decided in fewer calls than checks.
  constexpr int kGood = 10;
  constexpr int kRounds = 8;
  bool coalesced = false;
  for (int burst = 0; burst < 10 && !coalesced; ++burst) {
    std::vector<std::string> good;
    for (int g = 0; g < kGood; ++g) {
      good.push_back("good:" + std::to_string(burst) + ":" + std::to_string(g));
    }
    std::mutex mu;
    std::condition_variable all_done;
    std::vector<Outcomes> per_good(kGood);
    Outcomes corrupt;
    int left = kRounds * kGood * 2;
    const auto answered = [&](Outcomes& o, const Result<Decision>& d) {
      std::lock_guard lock(mu);
      Count(o, d);
      if (--left == 0) all_done.notify_all();
    };
    const int64_t calls_before = CommandCalls(*server, "evalsha");
    for (int r = 0; r < kRounds; ++r) {
      for (int g = 0; g < kGood; ++g) {
        redis->CheckAsync(log.Request(good[g], 1),
                          [&, g](Result<Decision> d) { answered(per_good[g], d); });
        redis->CheckAsync(log.Request("corrupt", 1),
                          [&](Result<Decision> d) { answered(corrupt, d); });
      }
    }
    {
      std::unique_lock lock(mu);
      ASSERT_TRUE(all_done.wait_for(lock, 10s, [&] { return left == 0; }));
    }
    coalesced = CommandCalls(*server, "evalsha") - calls_before < kRounds * kGood * 2;
    for (int g = 0; g < kGood; ++g) {
      EXPECT_EQ(per_good[g].allowed, 5) << good[g];
      EXPECT_EQ(per_good[g].denied, kRounds - 5) << good[g];
      EXPECT_TRUE(per_good[g].errors.empty())
          << good[g] << ": " << per_good[g].errors.front().ToString();
    }
    ASSERT_EQ(corrupt.errors.size(), static_cast<size_t>(kRounds * kGood));
    for (const Status& error : corrupt.errors) {
      EXPECT_EQ(error.code(), StatusCode::kInternal) << error.ToString();
    }
  }
  EXPECT_TRUE(coalesced) << "no burst was coalesced";
}

}  // namespace
}  // namespace sluice
