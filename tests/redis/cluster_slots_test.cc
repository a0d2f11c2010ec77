// Redis Cluster's replies without a cluster: CLUSTER SLOTS into slot ranges, MOVED and ASK into
// redirections, and the errors by which a cluster cannot serve a call now.
#include "redis/cluster_slots.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replies.h"

namespace sluice::redis {
namespace {

using namespace testing;

// One range of CLUSTER SLOTS: first, last, master (host, port, id), a replica.
Reply Range(int64_t first, int64_t last, std::string host, int64_t port) {
  return Array({Integer(first), Integer(last),
                Array({String(std::move(host)), Integer(port), String("id-m")}),
                Array({String("10.0.0.9"), Integer(7999), String("id-r")})});
}

TEST(ParseSlotRanges, MastersOfEachRange) {
  const Reply reply = Array({Range(0, 5460, "10.0.0.1", 7000), Range(5461, 10922, "", 7001),
                             Range(10923, 16383, "h3", 7002)});
  EXPECT_EQ(
      ParseSlotRanges(reply, "10.0.0.5:7005"),
      (std::vector<SlotRange>{
          {0, 5460, "10.0.0.1:7000"}, {5461, 10922, "10.0.0.5:7001"}, {10923, 16383, "h3:7002"}}));
}

TEST(ParseSlotRanges, AnythingElseIsNoMap) {
  const std::vector<Reply> bad = {
      Error("ERR This instance has cluster support disabled"),
      Integer(1),
      Array({Range(0, 16384, "h", 1)}),
      Array({Range(-1, 10, "h", 1)}),
      Array({Range(10, 9, "h", 1)}),
      Array({Range(0, 10, "h", 1), Array({Integer(11), Integer(20)})}),
      Array({Array({Integer(0), Integer(10), Array({Integer(1), Integer(2)})})}),
  };
  for (const auto& reply : bad) EXPECT_TRUE(ParseSlotRanges(reply, "h:1").empty());
  EXPECT_TRUE(ParseSlotRanges(Array({}), "h:1").empty());
}

TEST(ParseRedirect, MovedAndAsk) {
  EXPECT_EQ(ParseRedirect(Error("MOVED 3999 127.0.0.1:6381"), "127.0.0.1:6380"),
            (Redirect{.ask = false, .address = "127.0.0.1:6381"}));
  EXPECT_EQ(ParseRedirect(Error("ASK 3999 10.1.1.1:7002"), "127.0.0.1:6380"),
            (Redirect{.ask = true, .address = "10.1.1.1:7002"}));
  // An empty host is the replying node's.
  EXPECT_EQ(ParseRedirect(Error("MOVED 1 :7003"), "10.0.0.7:7000"),
            (Redirect{.ask = false, .address = "10.0.0.7:7003"}));
}

TEST(ParseRedirect, OtherRepliesAreNone) {
  EXPECT_FALSE(ParseRedirect(String("MOVED 1 h:2"), "h:1"));
  EXPECT_FALSE(ParseRedirect(Error("TRYAGAIN Multiple keys request during rehashing"), "h:1"));
  EXPECT_FALSE(ParseRedirect(Error("ASKING is not a redirect"), "h:1"));
  EXPECT_FALSE(ParseRedirect(Integer(0), "h:1"));
}

TEST(ParseClusterRefusal, WhatTheClusterCannotServeNow) {
  EXPECT_EQ(ParseClusterRefusal(Error("TRYAGAIN Multiple keys request during rehashing of slot")),
            ClusterRefusal::kTryAgain);
  EXPECT_EQ(ParseClusterRefusal(Error("CLUSTERDOWN The cluster is down")),
            ClusterRefusal::kMapStale);
  EXPECT_EQ(ParseClusterRefusal(Error("ERR Script attempted to access a non local key in a "
                                      "cluster node script: 12ab, on @user_script:9.")),
            ClusterRefusal::kMapStale);
  EXPECT_EQ(ParseClusterRefusal(
                Error("ERR Script attempted to execute a command while the cluster is down")),
            ClusterRefusal::kMapStale);
  // Redis 7.4 on.
  EXPECT_EQ(ParseClusterRefusal(Error("ERR Unable to execute command 'exists' in script because "
                                      "undeclared keys were accessed during rehashing of the slot "
                                      "script: 12ab, on @user_script:9.")),
            ClusterRefusal::kTryAgain);
  EXPECT_EQ(ParseClusterRefusal(Error("ERR Script attempted to access a slot not served script: "
                                      "12ab, on @user_script:9.")),
            ClusterRefusal::kMapStale);
  EXPECT_EQ(ParseClusterRefusal(Error("ERR Error running script: boom")), ClusterRefusal::kNone);
  EXPECT_EQ(ParseClusterRefusal(Error("MOVED 1 h:2")), ClusterRefusal::kNone);
  EXPECT_EQ(ParseClusterRefusal(String("TRYAGAIN")), ClusterRefusal::kNone);
}

}  // namespace
}  // namespace sluice::redis
