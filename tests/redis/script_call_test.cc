// The scripts' contract without a server: the exact words a check, a batch, a coalesced call,
// CheckAll and a give-back send (src/redis/script_call.h), and their replies parsed or split,
// malformed ones refused.
#include "redis/script_call.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replies.h"

namespace sluice::redis {
namespace {

using namespace std::chrono_literals;
using namespace testing;

std::vector<std::string> Words(const ScriptWords& words) {
  std::vector<std::string> out;
  for (const auto view : words.views()) out.emplace_back(view);
  return out;
}

const Limit kWindow = *Limit::Create(Algorithm::kFixedWindow, 10, 2s);
const Limit kLog = *Limit::Create(Algorithm::kSlidingLog, 7, 3s);
const Limit kBucket = *Limit::Create(Algorithm::kTokenBucket, 5, 1s, 4);

TEST(ScriptWords, OneCheckIsItsKeysThenSixArguments) {
  ScriptWords words;
  words.AddCheck({.prefix = "p:", .now = 1'700'000'000'000'000, .margin_ms = 3},
                 {.scope = "api", .limit = &kWindow, .key = "user{1}", .cost = 2});
  EXPECT_EQ(Words(words), (std::vector<std::string>{"p:api:{user%7B1%7D}", "1700000000000000", "3",
                                                    "2", "10", "2000000", "0"}));
}

TEST(ScriptWords, SlidingLogHasItsAuxiliaryKeyAndRedisTimeIsEmpty) {
  ScriptWords words;
  words.AddCheck({.prefix = "", .now = std::nullopt, .margin_ms = 1},
                 {.scope = "s", .limit = &kLog, .key = "k", .cost = 0});
  EXPECT_EQ(Words(words),
            (std::vector<std::string>{"s:{k}", "s:{k}:n", "", "1", "0", "7", "3000000", "0"}));
  EXPECT_EQ(CheckKeyCount(kLog), 2u);
  EXPECT_EQ(CheckKeyCount(kWindow), 1u);
}

TEST(ScriptWords, MetersSendCapacityEmissionIntervalAndMaxDelay) {
  ScriptWords words;
  words.AddCheck({.prefix = "x:", .now = 5, .margin_ms = 1},
                 {.scope = "b", .limit = &kBucket, .key = "k", .cost = 1, .max_delay = 750ms});
  EXPECT_EQ(Words(words), (std::vector<std::string>{
                              "x:b:{k}", "5", "1", "1", std::to_string(kBucket.capacity()),
                              std::to_string(kBucket.emission_interval().count()), "750000"}));
}

TEST(ScriptWords, CheckAllPutsTheClockFirstAndNameAndKeyCountBeforeEachCheck) {
  const CheckContext context{.prefix = "p:", .now = 9, .margin_ms = 2};
  ScriptWords words;
  words.AddClock(context);
  words.AddText(kChargeMode);
  words.AddCheckOfAll(context, {.scope = "a", .limit = &kLog, .key = "k1", .cost = 1});
  words.AddCheckOfAll(context, {.scope = "b", .limit = &kWindow, .key = "k2", .cost = 3});
  EXPECT_EQ(Words(words),
            (std::vector<std::string>{"9", "2", "charge", "sliding_log", "2", "p:a:{k1}",
                                      "p:a:{k1}:n", "1", "7", "3000000", "fixed_window", "1",
                                      "p:b:{k2}", "3", "10", "2000000"}));
  EXPECT_EQ(Words(words)[kCheckAllModeArg], "charge");
}

TEST(ScriptWords, ABatchOutgrowingTheInlineSpaceKeepsEveryWord) {
  const CheckContext context{.prefix = "prefix:", .now = 1, .margin_ms = 1};
  const std::string long_key(300, 'k');
  ScriptWords words;
  for (int i = 0; i < 20; ++i) {
    words.AddCheck(context, {.scope = "s", .limit = &kLog, .key = long_key, .cost = i});
  }
  const auto views = words.views();
  ASSERT_EQ(views.size(), 20u * 8);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(views[i * 8], "prefix:s:{" + long_key + "}");
    EXPECT_EQ(views[i * 8 + 1], "prefix:s:{" + long_key + "}:n");
    EXPECT_EQ(views[i * 8 + 4], std::to_string(i));
  }
}

TEST(ScriptWords, AGiveBackIsTheStateKeyThenSixArguments) {
  ScriptWords words;
  words.AddGiveBack({.prefix = "x:", .now = 5, .margin_ms = 2}, "b", kBucket, "k{1}", 3,
                    kNoApplyBy);
  EXPECT_EQ(Words(words), (std::vector<std::string>{
                              "x:b:{k%7B1%7D}", "5", "2", "3", std::to_string(kBucket.capacity()),
                              std::to_string(kBucket.emission_interval().count()), ""}));
  EXPECT_EQ(words.size(), 1 + kGiveBackArgs);
  ScriptWords due;
  due.AddGiveBack({.prefix = "x:", .now = 5, .margin_ms = 2}, "b", kBucket, "k{1}", 3,
                  Time(Duration(7)));
  EXPECT_EQ(Words(due).back(), "7");
}

// The words of a command as written (RESP: an array of bulk strings), read back.
std::vector<std::string> CommandWords(const std::string& command) {
  ReplyReader reader;
  EXPECT_TRUE(reader.Feed(command.data(), command.size()));
  auto next = reader.Next();
  EXPECT_TRUE(next.ok() && next->has_value());
  std::vector<std::string> out;
  if (!next.ok() || !next->has_value()) return out;
  for (const Reply& word : (*next)->elements) out.push_back(word.str);
  EXPECT_FALSE(*reader.Next());  // nothing after the one command
  return out;
}

// A check's coalescible call, as the store makes it (redis_store.cc): its single call's words,
// the cost its own.
struct Coalescible {
  ScriptWords words;
  ScriptWords::Views views;

  Coalescible(const CheckContext& context, const CheckRequest& request) {
    words.AddCheck(context, request);
    views = words.views();
  }
  CoalescibleCall Call(const Script& many, bool across_slots = false) const {
    const size_t keys = views.size() - kCheckArgs;
    return {.single = {&many, std::span(views.data(), keys),
                       std::span(views.data() + keys, kCheckArgs)},
            .many = &many,
            .own_arg = kCheckCostArg,
            .across_slots = across_slots};
  }
};

const Script kMany = Script::FromSource("return 0");
const CheckContext kContext{.prefix = "p:", .now = 100, .margin_ms = 1};

std::string Coalesce(CoalescedCallBuilder& builder, bool across_slots,
                     const std::vector<const Coalescible*>& checks) {
  for (const Coalescible* check : checks) {
    builder.Add(CoalescedCheckWords::Of(check->Call(kMany, across_slots)));
  }
  EXPECT_EQ(builder.checks(), checks.size());
  std::string command;
  builder.Finish(kMany, across_slots, command);
  EXPECT_EQ(builder.checks(), 0u);
  return command;
}

TEST(CoalescedCallBuilder, ChecksOfOneRunShareTheirArgumentsAndKeepTheirCosts) {
  const Coalescible a(kContext, {.scope = "s", .limit = &kWindow, .key = "a", .cost = 1});
  const Coalescible b(kContext, {.scope = "s", .limit = &kWindow, .key = "b", .cost = 4});
  CoalescedCallBuilder builder;
  EXPECT_EQ(CommandWords(Coalesce(builder, false, {&a, &b})),
            (std::vector<std::string>{"EVALSHA", kMany.sha1, "2", "p:s:{a}", "p:s:{b}",
                                      // runs, repeat, across slots
                                      "1", "0", "0",
                                      // the run: its first check, now, margin, parameters
                                      "0", "100", "1", "10", "2000000", "0",
                                      // the costs
                                      "1", "4"}));
}

TEST(CoalescedCallBuilder, ARunEndsWhereTheSharedArgumentsChange) {
  const Coalescible a(kContext, {.scope = "s", .limit = &kWindow, .key = "a", .cost = 1});
  const Coalescible b(kContext, {.scope = "s", .limit = &kWindow, .key = "b", .cost = 2});
  const Coalescible c(kContext, {.scope = "s", .limit = &kBucket, .key = "c", .cost = 3});
  const Coalescible d(kContext, {.scope = "s", .limit = &kWindow, .key = "d", .cost = 5});
  const std::string capacity = std::to_string(kBucket.capacity());
  const std::string interval = std::to_string(kBucket.emission_interval().count());
  CoalescedCallBuilder builder;
  EXPECT_EQ(
      CommandWords(Coalesce(builder, false, {&a, &b, &c, &d})),
      (std::vector<std::string>{
          "EVALSHA", kMany.sha1, "4",       "p:s:{a}", "p:s:{b}", "p:s:{c}", "p:s:{d}", "3",
          "0",       "0",        "0",       "100",     "1",       "10",      "2000000", "0",
          "2",       "100",      "1",       capacity,  interval,  "0",       "3",       "100",
          "1",       "10",       "2000000", "0",       "1",       "2",       "3",       "5"}));
}

TEST(CoalescedCallBuilder, AKeyTwiceSetsTheRepeatFlag) {
  const Coalescible a(kContext, {.scope = "s", .limit = &kWindow, .key = "a", .cost = 1});
  const Coalescible b(kContext, {.scope = "s", .limit = &kWindow, .key = "b", .cost = 1});
  CoalescedCallBuilder builder;
  // EVALSHA, sha, key count, the keys, the number of runs, then the flag.
  EXPECT_EQ(CommandWords(Coalesce(builder, false, {&a, &b, &a}))[7], "1");
  EXPECT_EQ(CommandWords(Coalesce(builder, false, {&a, &b}))[6], "0");
}

TEST(CoalescedCallBuilder, AcrossSlotsOnlyTheFirstChecksKeysAreDeclared) {
  const Coalescible a(kContext, {.scope = "s", .limit = &kLog, .key = "a", .cost = 1});
  const Coalescible b(kContext, {.scope = "s", .limit = &kLog, .key = "b", .cost = 2});
  CoalescedCallBuilder builder;
  EXPECT_EQ(CommandWords(Coalesce(builder, true, {&a, &b})),
            (std::vector<std::string>{"EVALSHA", kMany.sha1, "2", "p:s:{a}", "p:s:{a}:n", "1", "0",
                                      "1", "0", "100", "1", "7", "3000000", "0", "1", "2",
                                      // the other checks' keys, after the costs
                                      "p:s:{b}", "p:s:{b}:n"}));
}

TEST(CoalescedCallBuilder, ACheckAloneIsACallOfOne) {
  const Coalescible a(kContext, {.scope = "s", .limit = &kWindow, .key = "a", .cost = 7});
  CoalescedCallBuilder builder;
  const std::vector<std::string> alone{"EVALSHA", kMany.sha1, "1", "p:s:{a}", "1",       "0", "0",
                                       "0",       "100",      "1", "10",      "2000000", "0", "7"};
  EXPECT_EQ(CommandWords(Coalesce(builder, false, {&a})), alone);
  EXPECT_EQ(CommandWords(Coalesce(builder, true, {&a}))[6], "1");  // across slots
  // Finished, the builder starts over: nothing of the calls before is left in it.
  EXPECT_EQ(CommandWords(Coalesce(builder, false, {&a})), alone);
}

TEST(CoalescedReply, EachCheckGetsItsShareOfTheFlatArray) {
  Reply reply = Integers({1, 2, 3, 4, 5, 6, 7, 8});
  ASSERT_EQ(CoalescedReplyFields(reply, 2), 4u);
  const Reply second = TakeCoalescedReply(reply, 1, 2, 4);
  const Reply first = TakeCoalescedReply(reply, 0, 2, 4);
  ASSERT_EQ(first.elements.size(), 4u);
  ASSERT_EQ(second.elements.size(), 4u);
  EXPECT_EQ(first.elements[0].integer, 1);
  EXPECT_EQ(second.elements[0].integer, 5);
  EXPECT_EQ(second.elements[3].integer, 8);
  Reply alone = Integers({1, 0, 0, 0});
  ASSERT_EQ(CoalescedReplyFields(alone, 1), 4u);
  EXPECT_EQ(TakeCoalescedReply(alone, 0, 1, 4).elements.size(), 4u);
}

TEST(CoalescedReply, ErrorsAndMalformedRepliesAreNotSplit) {
  EXPECT_EQ(CoalescedReplyFields(Error("ERR x"), 2), 0u);
  EXPECT_EQ(CoalescedReplyFields(Integer(1), 1), 0u);
  EXPECT_EQ(CoalescedReplyFields(Integers({}), 1), 0u);
  EXPECT_EQ(CoalescedReplyFields(Integers({1, 2, 3}), 2), 0u);
}

TEST(ParseGiveBackReply, ZeroOrOneIsOkAnythingElseAnError) {
  EXPECT_TRUE(ParseGiveBackReply(Integer(1)).ok());
  EXPECT_TRUE(ParseGiveBackReply(Integer(0)).ok());
  for (const Reply& reply :
       {Integer(2), Integers({1}), String("1"), MakeReply(Reply::Type::kNil)}) {
    EXPECT_EQ(ParseGiveBackReply(reply).code(), StatusCode::kInternal);
  }
  const Status failed = ParseGiveBackReply(Error("ERR Error running script: oops"));
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_EQ(failed.message(), "Redis failed the give-back: ERR Error running script: oops");
  EXPECT_EQ(ParseGiveBackReply(Error("MOVED 3999 127.0.0.1:7001")).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(ParseGiveBackReply(Result<Reply>(Status::DeadlineExceeded("late"))).code(),
            StatusCode::kDeadlineExceeded);
}

// check.lua's six fields, and the four of check_many.lua's packed reply (allowed in the sign of
// remaining, delay or retry_after in one field), make the same decisions.
TEST(ParseCheckReply, SixIntegersOrFourPackedMakeADecision) {
  struct Case {
    std::vector<int64_t> six, packed;
    Decision decision;
  };
  const Case cases[] = {
      {{1, 4, 0, 2000, 30, 500},
       {4, 30, 2000, 500},
       {.allowed = true,
        .limit = 10,
        .remaining = 4,
        .retry_after = Duration(0),
        .reset_after = Duration(2000),
        .replenish_after = Duration(500),
        .delay = Duration(30)}},
      {{0, 0, 700, 900, 0, 700},
       {-1, 700, 900, 700},
       {.allowed = false,
        .limit = 10,
        .remaining = 0,
        .retry_after = Duration(700),
        .reset_after = Duration(900),
        .replenish_after = Duration(700),
        .delay = Duration(0)}},
      {{0, 2, 50, 60, 0, 0},  // refused, with room for less than its cost
       {-3, 50, 60, 0},
       {.allowed = false,
        .limit = 10,
        .remaining = 2,
        .retry_after = Duration(50),
        .reset_after = Duration(60),
        .replenish_after = Duration(0),
        .delay = Duration(0)}},
  };
  for (const Case& c : cases) {
    for (const std::vector<int64_t>& fields : {c.six, c.packed}) {
      const auto d = ParseCheckReply(Integers(fields), 10);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      EXPECT_EQ(*d, c.decision) << fields.size() << " fields";
    }
  }
}

TEST(ParseCheckReply, MalformedRepliesAreInternal) {
  const std::vector<Reply> malformed = {
      Integers({1, 4, 0, 2000, 30}),
      Integers({1, 4, 0}),
      Array({Integer(1), Integer(4), String("0"), Integer(0)}),
      Integers({1, 4, 0, 2000, 30, 500, 1}),
      Integers({2, 4, 0, 2000, 30, 500}),
      Integers({-1, 4, 0, 2000, 30, 500}),
      Array({Integer(1), Integer(4), String("0"), Integer(0), Integer(0), Integer(0)}),
      Integer(1),
      MakeReply(Reply::Type::kNil),
      StatusReply("OK"),
      Array({}),
  };
  for (const auto& reply : malformed) {
    EXPECT_EQ(ParseCheckReply(reply, 1).status().code(), StatusCode::kInternal);
  }
}

// Redis's error replies by what they mean (error_reply.h): the store out, the store full, or a
// fault of the call's keys. The texts are Redis 7.0's, a script's error included.
TEST(ParseCheckReply, ErrorRepliesAreAnOutageAFullStoreOrTheKeysFault) {
  const auto code = [](const std::string& error) {
    return ParseCheckReply(Error(error), 1).status().code();
  };
  for (const char* outage : {
           "LOADING Redis is loading the dataset in memory",
           "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
           "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
           "CLUSTERDOWN The cluster is down",
           "TRYAGAIN Multiple keys request during rehashing of slot",
           "READONLY You can't write against a read only replica. script: 1c2d, on "
           "@user_script:31.",
           "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
           "persist to disk.",
           "NOREPLICAS Not enough good replicas to write.",
           "MOVED 3999 127.0.0.1:7001",
           "ASK 3999 127.0.0.1:7001",
           "NOSCRIPT No matching script. Please use EVAL.",
       }) {
    EXPECT_EQ(code(outage), StatusCode::kUnavailable) << outage;
  }
  EXPECT_EQ(code("OOM command not allowed when used memory > 'maxmemory'. script: 1c2d, on "
                 "@user_script:26."),
            StatusCode::kResourceExhausted);
  for (const char* fault : {
           "WRONGTYPE Operation against a key holding the wrong kind of value script: 1c2d, on "
           "@user_script:61.",
           "ERR user_script:52: attempt to perform arithmetic on a nil value script: 1c2d, on "
           "@user_script:52.",
           "ERR Error running script: oops",
           "NOPERM this user has no permissions to run the 'evalsha' command",
           "",
       }) {
    EXPECT_EQ(code(fault), StatusCode::kInternal) << fault;
  }
  EXPECT_EQ(ParseCheckReply(Result<Reply>(Status::DeadlineExceeded("late")), 1).status().code(),
            StatusCode::kDeadlineExceeded);
}

// check_many.lua answers a check whose key is at fault with the error in its first field.
TEST(ParseCheckReply, APackedReplyHoldingAnErrorIsThatError) {
  const auto packed = [](Reply first) {
    return Array({std::move(first), Integer(0), Integer(0), Integer(0)});
  };
  const Status wrong_type =
      ParseCheckReply(packed(Error("WRONGTYPE Operation against a key holding the wrong kind")), 5)
          .status();
  EXPECT_EQ(wrong_type.code(), StatusCode::kInternal);
  EXPECT_NE(wrong_type.message().find("WRONGTYPE"), std::string::npos) << wrong_type.ToString();
  EXPECT_EQ(ParseCheckReply(packed(Error("OOM command not allowed")), 5).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(ParseCheckReply(Array({Integer(1), Error("ERR x"), Integer(0), Integer(0)}), 5)
                .status()
                .code(),
            StatusCode::kInternal);
}

TEST(ParseCheckAllReply, OneDecisionPerCheckInOrder) {
  const int64_t counts[] = {10, 7};
  const auto all = ParseCheckAllReply(
      Array({Integers({1, 9, 0, 100, 0, 10}), Integers({0, 0, 300, 400, 0, 300})}), counts);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_TRUE((*all)[0].allowed);
  EXPECT_EQ((*all)[0].limit, 10);
  EXPECT_FALSE((*all)[1].allowed);
  EXPECT_EQ((*all)[1].limit, 7);
  EXPECT_EQ((*all)[1].retry_after, Duration(300));
}

TEST(ParseCheckAllReply, MalformedRepliesAreInternal) {
  const int64_t counts[] = {10, 7};
  const std::vector<Reply> malformed = {
      Array({Integers({1, 9, 0, 100, 0, 10})}),
      Array({Integers({1, 9, 0, 100, 0, 10}), Integers({1, 9, 0, 100, 0, 10}),
             Integers({1, 9, 0, 100, 0, 10})}),
      Array({Integers({1, 9, 0, 100, 0, 10}), Integers({1, 9, 0})}),
      Array({Integers({1, 9, 0, 100, 0, 10}), Integer(1)}),
      Integers({1, 9, 0, 100, 0, 10}),
      MakeReply(Reply::Type::kNil),
  };
  for (const auto& reply : malformed) {
    EXPECT_EQ(ParseCheckAllReply(reply, counts).status().code(), StatusCode::kInternal);
  }
  EXPECT_EQ(ParseCheckAllReply(Error("ERR Script attempted to access a non local key"), counts)
                .status()
                .code(),
            StatusCode::kInternal);
  EXPECT_EQ(ParseCheckAllReply(Result<Reply>(Status::Unavailable("down")), counts).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sluice::redis
