// Keys holding values sluice never writes, put in Redis by hand: numbers Lua's tonumber reads but
// no state holds ("nan", "inf", "1e300", "0x10", " 5 "), integers out of the bounds of every state
// (core::InRange), packed states of the wrong length or with a field out of bounds, sorted sets
// whose entries or auxiliary key are not running counts, hashes. Every script reads such a key as
// a foreign state: its decision is a fresh key's, on each path (check.lua alone, check_many.lua
// with its states read up front and across slots, check_all.lua), the key then has its TTL (or is
// deleted by a peek), and exactly the limit is admitted from it; a meter's give-back leaves it as
// it is. A seeded fuzz writes random such values, and random values within the bounds, and checks
// every answer is a sane decision.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms.h"
#include "redis/scripts.h"
#include "store_test_support.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kNow = 1'700'000'000'123'456;
constexpr int64_t kLatestTime = kNow + core::kMaxStateAhead;
constexpr int64_t kCapacity = 3;
constexpr Duration kPeriod = 1h;
// The most units beyond the capacity a meter of kCapacity per kPeriod may hold (core::InRange).
constexpr int64_t kMostDebt = core::kMaxStateAhead / (kPeriod.count() / kCapacity);

// A tag byte then little-endian fields of the given widths, as the scripts pack a state.
std::string Packed(char tag, std::initializer_list<std::pair<int64_t, int>> fields) {
  std::string value(1, tag);
  for (auto [v, bytes] : fields) {
    for (int i = 0; i < bytes; ++i) value.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  return value;
}

// What a key is given: a string, a hash, or a sorted set of (score, member) with the auxiliary
// key's value (none: no auxiliary key).
struct Stored {
  enum class Type { kString, kHash, kLog } type = Type::kString;
  std::string value;
  std::vector<std::pair<std::string, std::string>> entries;  // hash fields, or log entries
  std::optional<std::string> aux;

  std::string Describe() const {
    std::string text = type == Type::kString ? "string" : type == Type::kHash ? "hash" : "log";
    auto printable = [](const std::string& s) {
      std::string out;
      for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f) {
          out.push_back(static_cast<char>(c));
        } else {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        }
      }
      return "'" + out + "'";
    };
    if (type == Type::kString) return text + " " + printable(value);
    for (const auto& [a, b] : entries) text += " " + printable(a) + "=" + printable(b);
    if (aux) text += " aux " + printable(*aux);
    return text;
  }
};

Stored String(std::string value) {
  Stored stored;
  stored.value = std::move(value);
  return stored;
}
Stored Hash(std::vector<std::pair<std::string, std::string>> fields) {
  Stored stored;
  stored.type = Stored::Type::kHash;
  stored.entries = std::move(fields);
  return stored;
}
Stored Log(std::vector<std::pair<std::string, std::string>> entries,
           std::optional<std::string> aux) {
  Stored stored;
  stored.type = Stored::Type::kLog;
  stored.entries = std::move(entries);
  stored.aux = std::move(aux);
  return stored;
}
std::string Num(int64_t n) { return std::to_string(n); }

// Numbers tonumber() reads and strings it does not, none a value sluice writes.
const std::vector<std::string> kBadNumbers = {
    "nan", "inf", "-inf", "1e300", "-1", "9223372036854775807", "0x10", "", "garbage",
    " 5 ", "1.5", "-0",   "+5",    "05", "4294967296"};

// Values no key of `algorithm` holds as sluice writes it, each a foreign state.
std::vector<Stored> Corruptions(Algorithm algorithm) {
  std::vector<Stored> all;
  const int64_t huge_time = (int64_t{1} << 56) - 1;
  const auto strings = [&](std::initializer_list<std::string> values) {
    for (const std::string& v : values) all.push_back(String(v));
  };
  switch (algorithm) {
    case Algorithm::kSlidingLog: {
      const std::string recent = Num(kNow - 1'000'000);
      for (const std::string& bad : kBadNumbers) {
        all.push_back(Log({{recent, bad}}, "0"));  // the newest entry's running count
        all.push_back(Log({{recent, "3"}}, bad));  // the count of the units gone
        // The running count of the entry before the live ones, and the oldest entry's when the
        // count of the units gone was lost.
        all.push_back(Log({{Num(kNow - 7'200'000'000), bad}, {recent, "3"}}, std::nullopt));
        all.push_back(Log({{Num(kNow - 2'000'000), bad}, {recent, "3"}}, std::nullopt));
      }
      for (const char* score :
           {"inf", "-inf", "1e300", "-1", "9223372036854775807", "1700000000000000.5"}) {
        all.push_back(Log({{score, "1"}}, "0"));
      }
      all.push_back(Log({{Num(kLatestTime + 1'000'000), "1"}}, "0"));
      all.push_back(Log({{recent, "100001"}}, "0"));  // more than a log holds
      all.push_back(Log({{recent, "abc:1"}}, "0"));   // the earlier format, damaged
      all.push_back(Log({{recent, Num(kNow) + ":nan"}}, "0"));
      strings({"nan", "garbage"});
      break;
    }
    case Algorithm::kGcra:
      for (const std::string& bad : kBadNumbers) {
        if (bad != "4294967296") all.push_back(String(bad));  // a TAT long past
      }
      strings({Num(kLatestTime + 1), "0" + Num(kNow), Num(kNow) + " ", "1.7e15"});
      break;
    case Algorithm::kTokenBucket:
      strings({"t", Packed('t', {{1, 4}, {kNow, 6}}), Packed('t', {{1, 4}, {kNow, 8}}),
               Packed('t', {{-kMostDebt - 1, 4}, {kNow, 7}}),
               Packed('t', {{1'000'000'001, 4}, {kNow, 7}}),
               Packed('t', {{1, 4}, {kLatestTime + 1, 7}}), Packed('t', {{1, 4}, {huge_time, 7}})});
      break;
    case Algorithm::kLeakyBucket:
      strings({"l", Packed('l', {{1, 4}, {kNow, 6}}), Packed('l', {{1, 4}, {kNow, 8}}),
               Packed('l', {{kCapacity + kMostDebt + 1, 4}, {kNow, 7}}),
               Packed('l', {{1, 4}, {kLatestTime + 1, 7}}), Packed('l', {{1, 4}, {huge_time, 7}})});
      break;
    case Algorithm::kFixedWindow:
      strings({"f", Packed('f', {{kNow, 7}, {1, 3}}), Packed('f', {{kNow, 7}, {1, 5}}),
               Packed('f', {{kNow, 7}, {1'000'000'001, 4}}),
               Packed('f', {{kLatestTime + 1, 7}, {1, 4}}),
               Packed('f', {{huge_time, 7}, {(int64_t{1} << 32) - 1, 4}})});
      break;
    case Algorithm::kSlidingWindow:
      strings({"w", Packed('w', {{kNow, 7}, {1, 4}, {1, 4}, {kNow, 6}}),
               Packed('w', {{kNow, 7}, {1, 4}, {1, 4}, {kNow, 8}}),
               Packed('w', {{kNow, 7}, {1'000'000'001, 4}, {1, 4}, {kNow, 7}}),
               Packed('w', {{kNow, 7}, {1, 4}, {1'000'000'001, 4}, {kNow, 7}}),
               Packed('w', {{kNow, 7}, {1, 4}, {1, 4}, {kLatestTime + 1, 7}}),
               Packed('w', {{kLatestTime + 1, 7}, {1, 4}, {1, 4}}),
               Packed('w', {{huge_time, 7}, {1, 4}, {1, 4}})});
      break;
  }
  if (algorithm != Algorithm::kGcra && algorithm != Algorithm::kSlidingLog) {
    for (const std::string& bad : kBadNumbers) all.push_back(String(bad));
  }
  // A hash, with a field missing or one too many for any state (none is a hash).
  all.push_back(Hash({{"tat", Num(kNow)}}));
  all.push_back(Hash({{"tokens", "1"}, {"x", "nan"}}));
  return all;
}

enum class Path { kCheck, kMany, kManyAcross, kAll };
constexpr Path kPaths[] = {Path::kCheck, Path::kMany, Path::kManyAcross, Path::kAll};
const char* PathName(Path path) {
  switch (path) {
    case Path::kCheck:
      return "check.lua";
    case Path::kMany:
      return "check_many.lua";
    case Path::kManyAcross:
      return "check_many.lua across slots";
    case Path::kAll:
      break;
  }
  return "check_all.lua";
}

std::string Describe(const Decision& d) {
  return std::string(d.allowed ? "allowed" : "denied") + " remaining=" + Num(d.remaining) +
         " retry_after=" + Num(d.retry_after.count()) +
         " reset_after=" + Num(d.reset_after.count()) +
         " replenish_after=" + Num(d.replenish_after.count()) + " delay=" + Num(d.delay.count());
}

class CorruptedStates : public RedisStoreTest, public ::testing::WithParamInterface<Algorithm> {
 protected:
  void SetUp() override {
    RedisStoreTest::SetUp();
    if (HasFatalFailure()) return;
    redis_ = MakeStore({.clock = &clock_, .expiry_margin = 10min});
    ASSERT_NE(redis_, nullptr);
    const redis::Script& many = redis::CheckManyScript(GetParam());
    ASSERT_EQ(Run({"SCRIPT", "LOAD", many.source}).str, many.sha1);
  }

  redis::Reply Run(const std::vector<std::string>& argv) {
    std::vector<std::string_view> words(argv.begin(), argv.end());
    auto reply = client_->CommandSync(words);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? std::move(*reply) : redis::Reply{};
  }

  // The state key, and sliding_log's auxiliary key.
  std::vector<std::string> Keys(const std::string& key) const {
    std::vector<std::string> names = redis_->KeysOf("s", key);
    if (GetParam() != Algorithm::kSlidingLog) names.resize(1);
    return names;
  }

  void Write(const std::string& key, const Stored& stored) {
    const std::vector<std::string> names = Keys(key);
    Run({"DEL", names[0]});
    if (names.size() > 1) Run({"DEL", names[1]});
    switch (stored.type) {
      case Stored::Type::kString:
        Run({"SET", names[0], stored.value});
        break;
      case Stored::Type::kHash:
        for (const auto& [field, value] : stored.entries) Run({"HSET", names[0], field, value});
        break;
      case Stored::Type::kLog:
        for (const auto& [score, member] : stored.entries) {
          ASSERT_EQ(Run({"ZADD", names[0], score, member}).type, redis::Reply::Type::kInteger)
              << stored.Describe();
        }
        if (stored.aux && names.size() > 1) Run({"SET", names[1], *stored.aux});
        break;
    }
  }

  CheckRequest Request(const Limit& limit, const std::string& key, int64_t cost) const {
    return {.scope = "s", .limit = &limit, .key = key, .cost = cost};
  }

  // The decisions on `key` and on `clean` (a key holding nothing) of a check of `cost` each, by
  // one call on `path`.
  std::pair<Result<Decision>, Result<Decision>> Decide(Path path, const Limit& limit,
                                                       const std::string& key,
                                                       const std::string& clean, int64_t cost) {
    if (path == Path::kCheck) {
      return {redis_->Check(Request(limit, key, cost)), redis_->Check(Request(limit, clean, cost))};
    }
    if (path == Path::kAll) {
      const CheckRequest both[] = {Request(limit, key, cost), Request(limit, clean, cost)};
      Result<std::vector<Decision>> r = redis_->CheckAll(both);
      if (!r.ok()) return {r.status(), r.status()};
      return {(*r)[0], (*r)[1]};
    }
    // check_many.lua's KEYS and ARGV (src/redis/script_call.h): one run of two checks.
    const bool across = path == Path::kManyAcross;
    const std::vector<std::string> first = Keys(key), second = Keys(clean);
    std::vector<std::string> argv = {"EVALSHA", redis::CheckManyScript(limit.algorithm()).sha1};
    std::vector<std::string> keys = first;
    if (!across) keys.insert(keys.end(), second.begin(), second.end());
    argv.push_back(Num(static_cast<int64_t>(keys.size())));
    argv.insert(argv.end(), keys.begin(), keys.end());
    const int64_t interval =
        IsMeter(limit.algorithm()) ? limit.emission_interval().count() : limit.period().count();
    for (const std::string& word :
         {std::string("1"), std::string("0"), std::string(across ? "1" : "0"), std::string("0"),
          Num(kNow), std::string("600000"), Num(limit.capacity()), Num(interval), std::string("0"),
          Num(cost), Num(cost)}) {
      argv.push_back(word);
    }
    if (across) argv.insert(argv.end(), second.begin(), second.end());
    const redis::Reply reply = Run(argv);
    if (reply.type != redis::Reply::Type::kArray || reply.elements.size() != 8) {
      const Status error = Status::Internal("check_many.lua replied " + reply.str);
      return {error, error};
    }
    const auto unpack = [&](size_t at) {
      const int64_t first_field = reply.elements[at].integer;
      const int64_t second_field = reply.elements[at + 1].integer;
      const bool allowed = first_field >= 0;
      return Decision{.allowed = allowed,
                      .limit = limit.count(),
                      .remaining = allowed ? first_field : -1 - first_field,
                      .retry_after = Duration(allowed ? 0 : second_field),
                      .reset_after = Duration(reply.elements[at + 2].integer),
                      .replenish_after = Duration(reply.elements[at + 3].integer),
                      .delay = Duration(allowed ? second_field : 0)};
    };
    return {unpack(0), unpack(4)};
  }

  // Every key of `key` exists only with a TTL; `gone`: none exists.
  void ExpectExpiresOrGone(const std::string& key, bool gone, const std::string& what) {
    for (const std::string& name : Keys(key)) {
      const int64_t ttl = Run({"PTTL", name}).integer;
      if (gone) {
        EXPECT_EQ(ttl, -2) << what << ": " << name << " left behind";
      } else {
        EXPECT_GT(ttl, 0) << what << ": " << name << " without a TTL";
      }
    }
  }

  ManualClock clock_{Time(Duration(kNow))};
  std::unique_ptr<RedisStore> redis_;
};

// Checked against a fresh key's decision on each path: before the scripts bounded what they read,
// gcra answered "nan" with remaining -9223372036854775808 and a denial with retry_after 0, "inf"
// and "1e300" with a denial for ever (retry_after 0), and token_bucket, leaky_bucket,
// fixed_window and sliding_window failed with a Lua error on a tag without its fields.
TEST_P(CorruptedStates, AreReadAsFreshOnEveryPath) {
  const Algorithm algorithm = GetParam();
  const Limit limit = *Limit::Create(algorithm, kCapacity, kPeriod);
  int n = 0;
  for (const Stored& stored : Corruptions(algorithm)) {
    for (Path path : kPaths) {
      const std::string key = "bad" + Num(n), clean = "clean" + Num(n);
      ++n;
      const std::string what =
          std::string(AlgorithmName(algorithm)) + ", " + PathName(path) + ", " + stored.Describe();
      Write(key, stored);
      const auto [got, fresh] = Decide(path, limit, key, clean, 1);
      ASSERT_TRUE(fresh.ok()) << what << ": " << fresh.status().ToString();
      EXPECT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      if (!got.ok()) continue;
      EXPECT_EQ(*got, *fresh) << what << ": " << Describe(*got) << ", fresh " << Describe(*fresh);
      ExpectExpiresOrGone(key, false, what);
      // Exactly the limit, from the first check on.
      for (int64_t i = 1; i < kCapacity; ++i) {
        EXPECT_TRUE(redis_->Check(Request(limit, key, 1))->allowed) << what << ", check " << i;
      }
      const Result<Decision> denied = redis_->Check(Request(limit, key, 1));
      ASSERT_TRUE(denied.ok()) << what;
      EXPECT_FALSE(denied->allowed) << what;
      EXPECT_EQ(denied->remaining, 0) << what;
      EXPECT_GT(denied->retry_after, 0us) << what;
      // sliding_window weighs the units of this window into the next one.
      EXPECT_LE(denied->retry_after, algorithm == Algorithm::kSlidingWindow ? 2 * kPeriod : kPeriod)
          << what;
    }
    // A peek reads it as fresh too, and deletes it.
    const std::string key = "peek" + Num(n++);
    Write(key, stored);
    const Result<Decision> peek = redis_->Check(Request(limit, key, 0));
    ASSERT_TRUE(peek.ok()) << stored.Describe() << ": " << peek.status().ToString();
    EXPECT_TRUE(peek->allowed) << stored.Describe();
    EXPECT_EQ(peek->remaining, kCapacity) << stored.Describe();
    ExpectExpiresOrGone(key, true, "a peek of " + stored.Describe());
  }
}

// A meter gives nothing back to a foreign state, and leaves it as it is.
class CorruptedMeterStates : public CorruptedStates {};

TEST_P(CorruptedMeterStates, GiveBackLeavesThemAlone) {
  const Algorithm algorithm = GetParam();
  const Limit limit = *Limit::Create(algorithm, kCapacity, kPeriod);
  for (const Stored& stored : Corruptions(algorithm)) {
    if (stored.type != Stored::Type::kString) continue;
    Write("k", stored);
    EXPECT_TRUE(redis_->GiveBack("s", limit, "k", 1).ok()) << stored.Describe();
    EXPECT_EQ(Run({"GET", Keys("k")[0]}).str, stored.value) << stored.Describe();
  }
  Run({"DEL", Keys("k")[0]});
}

INSTANTIATE_TEST_SUITE_P(Meters, CorruptedMeterStates,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                           Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// Random values for the fuzz below.
class RandomValues {
 public:
  explicit RandomValues(uint64_t seed) : rng_(seed) {}

  int64_t Between(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool OneIn(int n) { return Between(1, n) == 1; }
  template <typename T>
  const T& Pick(const std::vector<T>& from) {
    return from[static_cast<size_t>(Between(0, static_cast<int64_t>(from.size()) - 1))];
  }

  // A time within the bounds: mostly near now, sometimes anywhere up to the latest.
  int64_t Time() {
    return OneIn(4) ? Between(0, kLatestTime) : Between(kNow - 7'200'000'000, kNow + 60'000'000);
  }
  int64_t LateTime() { return Between(kLatestTime + 1, (int64_t{1} << 56) - 1); }

  // `valid` as sluice would never write it: the same number written otherwise, or bytes that
  // are no number at all.
  std::string Misspelt(const std::string& valid) {
    switch (Between(0, 8)) {
      case 0:
        return "0" + valid;
      case 1:
        return "+" + valid;
      case 2:
        return " " + valid;
      case 3:
        return valid + " ";
      case 4:
        return valid + ".0";
      case 5:
        return valid + "e0";
      case 6:
        return "-" + valid;
      case 7:
        return valid.substr(0, valid.size() / 2) + "x" + valid.substr(valid.size() / 2);
      default:
        break;
    }
    std::string bytes(static_cast<size_t>(Between(0, 20)), '\0');
    for (char& c : bytes) c = static_cast<char>(Between(0, 255));
    return bytes + "z";  // never all digits
  }

  // A packed state of `algorithm` (not sliding_log, not gcra): its fields within the bounds, or
  // when `foreign`, one of them beyond them or the length wrong.
  std::string Packed(Algorithm algorithm, bool foreign) {
    const int broken = foreign ? static_cast<int>(Between(0, 2)) : -1;
    auto time = [&](int field) { return broken == field ? LateTime() : Time(); };
    auto count = [&](int field, int64_t most, int64_t wide) {
      return broken == field ? Between(most + 1, wide) : Between(0, most);
    };
    std::string value;
    switch (algorithm) {
      case Algorithm::kFixedWindow:
        value = sluice::testing::Packed(
            'f', {{time(0), 7}, {count(1, Limit::kMaxCount, (int64_t{1} << 32) - 1), 4}});
        break;
      case Algorithm::kSlidingWindow:
        value =
            sluice::testing::Packed('w', {{time(0), 7},
                                          {count(1, Limit::kMaxCount, (int64_t{1} << 32) - 1), 4},
                                          {count(2, Limit::kMaxCount, (int64_t{1} << 32) - 1), 4},
                                          {time(2), 7}});
        if (!foreign && OneIn(4)) value.resize(16);  // the earlier layout
        break;
      case Algorithm::kTokenBucket: {
        int64_t tokens = Between(-kMostDebt, Limit::kMaxCount);
        if (broken == 1) {
          tokens = OneIn(2) ? Between(-(int64_t{1} << 31), -kMostDebt - 1)
                            : Between(Limit::kMaxCount + 1, (int64_t{1} << 31) - 1);
        }
        value = sluice::testing::Packed('t', {{tokens, 4}, {time(0), 7}});
        break;
      }
      case Algorithm::kLeakyBucket:
      default:
        value = sluice::testing::Packed(
            'l', {{count(1, kCapacity + kMostDebt, (int64_t{1} << 32) - 1), 4}, {time(0), 7}});
        break;
    }
    if (broken == 2) {
      // Shorter or longer, but not sliding_window's other layout.
      do {
        const int64_t length = Between(1, 30);
        value.resize(static_cast<size_t>(length), static_cast<char>(Between(0, 255)));
      } while (value.size() == 12 || value.size() == 16 || value.size() == 23);
    }
    return value;
  }

  // A state of `algorithm`, foreign (out of bounds, misspelt) or within the bounds.
  Stored State(Algorithm algorithm, bool foreign) {
    if (foreign && OneIn(4)) return Pick(Corruptions(algorithm));
    switch (algorithm) {
      case Algorithm::kGcra: {
        const std::string tat = Num(Time());
        if (!foreign) return String(tat);
        return String(OneIn(3) ? Num(LateTime()) : Misspelt(tat));
      }
      case Algorithm::kSlidingLog:
        return Log(foreign);
      default:
        return String(Packed(algorithm, foreign));
    }
  }

 private:
  // 1 to 4 entries and the count of the units gone; when `foreign`, one of them is not a running
  // count or time as the script writes it, or the log holds more than it can.
  Stored Log(bool foreign) {
    const int64_t entries = Between(1, 4);
    int64_t at = Between(kNow - 7'200'000'000, kNow - 3'600'000'000);
    int64_t running = Between(0, (int64_t{1} << 32) - 1);
    const int64_t left = OneIn(8) ? running + 200'000 : running;  // too many units
    Stored log = ::sluice::testing::Log({}, Num(left % (int64_t{1} << 32)));
    for (int64_t i = 0; i < entries; ++i) {
      at += Between(1, 3'000'000'000);
      running += Between(1, 2);
      log.entries.push_back({Num(at), Num(running % (int64_t{1} << 32))});
    }
    if (!foreign) {
      if (OneIn(4)) log.aux.reset();
      return log;
    }
    auto& newest = log.entries.back();
    switch (Between(0, 3)) {
      case 0:
        newest.second = Misspelt(newest.second);
        break;
      case 1:
        // The only entry, so that it is the newest whatever its score.
        log.entries.resize(1);
        log.entries[0].first = Pick<std::string>(
            {"inf", "-inf", "1e300", "-1", Num(LateTime()), Num(kNow - 1'000'000) + ".5"});
        break;
      case 2:
        log.aux = Misspelt(*log.aux);
        log.entries.resize(1);  // live, so that the count of the units gone is read
        log.entries[0].first = Num(kNow - 1'000'000);
        break;
      default:
        newest.second = Num(Between(int64_t{1} << 32, std::numeric_limits<int64_t>::max()));
        break;
    }
    return log;
  }

  std::mt19937_64 rng_;
};

// Random values on random paths: a foreign one is decided as a fresh key and leaves the key with
// its TTL or deletes it; any other is a sane decision (remaining within the capacity, waits
// positive when denied and finite, none beyond what a state within the bounds can ask).
TEST_P(CorruptedStates, FuzzedValuesGetSaneDecisions) {
  const Algorithm algorithm = GetParam();
  const Limit limit = *Limit::Create(algorithm, kCapacity, kPeriod);
  const uint64_t seed = 20261206 + static_cast<uint64_t>(algorithm);
  std::printf("corrupted states fuzz %s: seed %llu\n",
              std::string(AlgorithmName(algorithm)).c_str(), static_cast<unsigned long long>(seed));
  RandomValues random(seed);
  // A meter's units beyond its capacity, and a time stamped ahead of now, each wait at most
  // kMaxStateAhead; the windows add up to two periods.
  const Duration most = 2 * Duration(core::kMaxStateAhead) + 2 * kPeriod;
  int values = 0, foreign_count = 0, denied = 0;
  for (int i = 0; i < 250; ++i) {
    const bool foreign = random.OneIn(2);
    const Stored stored = random.State(algorithm, foreign);
    const Path path = kPaths[random.Between(0, 3)];
    const int64_t cost = random.Between(0, kCapacity);
    const std::string key = "fuzz" + Num(i), clean = "fuzzclean" + Num(i);
    const std::string what = std::string(AlgorithmName(algorithm)) + " step " + Num(i) + ", " +
                             PathName(path) + ", cost " + Num(cost) + ", " +
                             (foreign ? "foreign " : "") + stored.Describe();
    Write(key, stored);
    const auto [got, fresh] = Decide(path, limit, key, clean, cost);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    ASSERT_TRUE(fresh.ok()) << what << ": " << fresh.status().ToString();
    if (foreign) {
      ++foreign_count;
      EXPECT_EQ(*got, *fresh) << what << ": " << Describe(*got) << ", fresh " << Describe(*fresh);
      ExpectExpiresOrGone(key, cost == 0, what);
    }
    EXPECT_GE(got->remaining, 0) << what << ": " << Describe(*got);
    EXPECT_LE(got->remaining, kCapacity) << what << ": " << Describe(*got);
    if (got->allowed) {
      EXPECT_EQ(got->retry_after, 0us) << what << ": " << Describe(*got);
    } else {
      ++denied;
      EXPECT_GT(got->retry_after, 0us) << what << ": " << Describe(*got);
      EXPECT_LE(got->retry_after, most) << what << ": " << Describe(*got);
    }
    EXPECT_GE(got->reset_after, 0us) << what << ": " << Describe(*got);
    EXPECT_LE(got->reset_after, most) << what << ": " << Describe(*got);
    EXPECT_GE(got->replenish_after, 0us) << what << ": " << Describe(*got);
    EXPECT_LE(got->replenish_after, most) << what << ": " << Describe(*got);
    EXPECT_EQ(got->delay, 0us) << what;
    for (const std::string& name : Keys(key)) Run({"DEL", name});
    for (const std::string& name : Keys(clean)) Run({"DEL", name});
    if (HasFailure()) break;
    ++values;
  }
  std::printf("corrupted states fuzz %s: %d values, %d foreign, %d denied\n",
              std::string(AlgorithmName(algorithm)).c_str(), values, foreign_count, denied);
}

INSTANTIATE_TEST_SUITE_P(All, CorruptedStates, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

}  // namespace
}  // namespace sluice::testing
