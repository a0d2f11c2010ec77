// POST /json through the Api: answered by the route SetJsonRoute gives, with its status and body,
// now or later; GET is 405 with Allow; without a route the path is unknown.
#include "http/json_route_handler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/api.h"
#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

class JsonRouteTest : public ::testing::Test {
 protected:
  JsonRouteTest() : api_(store_, metrics_, RuleTable::Build({}, store_, metrics_)) {}

  // Sends one request; `answered` tells whether on_done has run.
  void Send(std::string_view method, std::string_view body,
            core::FairAdmission::Caller caller = 0) {
    answered_ = false;
    api_.Handle({.method = method, .target = "/json", .body = body, .caller = caller}, exchange_);
  }

  MemoryStore store_;
  Metrics metrics_;
  Api api_;
  bool answered_ = false;
  Exchange exchange_{[this] { answered_ = true; }};
};

TEST_F(JsonRouteTest, WithoutARouteThePathIsUnknown) {
  Send("POST", "{}");
  ASSERT_TRUE(answered_);
  EXPECT_EQ(exchange_.response.status, 404);
  EXPECT_NE(exchange_.response.body.find("no such path"), std::string::npos);
}

TEST_F(JsonRouteTest, TheRouteAnswersWithItsStatusAndBodyNowOrLater) {
  std::vector<std::string> bodies;
  std::vector<core::FairAdmission::Caller> callers;
  JsonDone held;
  api_.SetJsonRoute(
      [&](std::string_view body, core::FairAdmission::Caller caller, JsonDone done) {
        bodies.emplace_back(body);
        callers.push_back(caller);
        if (body == "later") {
          held = std::move(done);
        } else {
          done(429, R"({"overallCode":"OVER_LIMIT"})");
        }
      },
      [] { return std::string(); });

  Send("POST", R"({"domain":"api"})", 7);
  ASSERT_TRUE(answered_);
  EXPECT_EQ(exchange_.response.status, 429);
  EXPECT_EQ(exchange_.response.body, R"({"overallCode":"OVER_LIMIT"})");

  Send("POST", "later", 8);
  EXPECT_FALSE(answered_);
  ASSERT_TRUE(held);
  held(200, R"({"overallCode":"OK"})");
  ASSERT_TRUE(answered_);
  EXPECT_EQ(exchange_.response.status, 200);
  EXPECT_EQ(exchange_.response.body, R"({"overallCode":"OK"})");

  EXPECT_EQ(bodies, (std::vector<std::string>{R"({"domain":"api"})", "later"}));
  EXPECT_EQ(callers, (std::vector<core::FairAdmission::Caller>{7, 8}));
  EXPECT_EQ(metrics_.http_responses_for_testing(429), 1u);
  EXPECT_EQ(metrics_.http_responses_for_testing(200), 1u);
}

TEST_F(JsonRouteTest, OnlyPostIsRouted) {
  bool routed = false;
  api_.SetJsonRoute([&](std::string_view, core::FairAdmission::Caller,
                        JsonDone done) { routed = true, done(200, "{}"); },
                    [] { return std::string(); });
  Send("GET", "");
  ASSERT_TRUE(answered_);
  EXPECT_FALSE(routed);
  EXPECT_EQ(exchange_.response.status, 405);
  const std::string* allow = exchange_.response.FindHeader("Allow");
  ASSERT_NE(allow, nullptr);
  EXPECT_EQ(*allow, "POST");
  EXPECT_EQ(exchange_.response.body, R"({"error":"/json allows POST only"})");
}

}  // namespace
}  // namespace sluice::http
