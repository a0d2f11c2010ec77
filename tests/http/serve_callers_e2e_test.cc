// server.auth end to end through the real `sluice serve`: which token opens which endpoint
// (401/403/200), a refused caller moves no count, failed authentications are throttled per peer
// address, no token reaches the log, and a SIGHUP swaps the tokens.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/serve_process.h"

namespace {

using sluice::testing::Service;

// The hashes are SHA-256 of the tokens (printf %s TOKEN | sha256sum).
constexpr std::string_view kCheckoutToken = "checkout-token";
constexpr std::string_view kOpsToken = "ops-token";
constexpr std::string_view kOtherToken = "other-token";
constexpr std::string_view kNewToken = "new-token";

std::string Config(std::string_view checkout_hash =
                       "f73b9044d0a39db82876ca2560ec62234efc73e2560689b5b5a3fc92f70904e3") {
  return R"(rules:
  - {name: api, algorithm: fixed_window, limit: 5, period: 1h, key: [{header: x-user}]}
  - {name: other, algorithm: fixed_window, limit: 5, period: 1h}
server:
  expose_keys: true
  auth:
    callers:
      - {name: checkout, token_sha256: ")" +
         std::string(checkout_hash) + R"(", scopes: [check], rules: [api]}
      - {name: ops, token_sha256: "d9310c002af91822beb0b3487d8b04f85bf6bf1f8a5496bff7d35fc7c5a29def", scopes: [admin, metrics]}
      - {name: other, token_sha256: "6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754", scopes: [check]}
)";
}

httplib::Headers Bearer(std::string_view token) {
  return {{"Authorization", "Bearer " + std::string(token)}};
}

int Status(const httplib::Result& r) { return r ? r->status : -1; }

// The remaining count of `rule`'s key "k", peeked (cost 0) with a token that may check it.
int64_t Remaining(httplib::Client& client, std::string_view rule) {
  auto r = client.Post("/v1/check", Bearer(kOtherToken),
                       R"({"rule":")" + std::string(rule) + R"(","key":"k","cost":0})",
                       "application/json");
  if (!r || r->status != 200) return -1;
  return nlohmann::json::parse(r->body).value("remaining", int64_t{-1});
}

TEST(ServeCallersTest, EachEndpointNeedsATokenOfItsScope) {
  Service service(Config());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const std::string check = R"({"rule":"api","key":"k"})";
  const std::string acquire = R"({"rule":"api","key":"k","max_wait_ms":10})";

  auto none = client.Post("/v1/check", check, "application/json");
  EXPECT_EQ(Status(none), 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer("not-a-caller"), check, "application/json")),
            401);
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kOpsToken), check, "application/json")), 403);
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kCheckoutToken), check, "application/json")),
            200);
  EXPECT_EQ(Status(client.Post("/v1/acquire", Bearer(kOpsToken), acquire, "application/json")),
            403);
  EXPECT_EQ(Status(client.Post("/v1/acquire", Bearer(kCheckoutToken), acquire, "application/json")),
            200);

  httplib::Headers auth = Bearer(kCheckoutToken);
  auth.emplace("X-User", "u1");
  EXPECT_EQ(Status(client.Get("/v1/auth/api", auth)), 204);
  EXPECT_EQ(Status(client.Get("/v1/auth/other", auth)), 403);
  EXPECT_EQ(Status(client.Get("/v1/auth/api", {{"X-User", "u1"}})), 401);

  EXPECT_EQ(Status(client.Get("/v1/top")), 401);
  EXPECT_EQ(Status(client.Get("/v1/top", Bearer(kCheckoutToken))), 403);
  EXPECT_EQ(Status(client.Get("/v1/top", Bearer(kOpsToken))), 200);
  EXPECT_EQ(Status(client.Get("/metrics", Bearer(kCheckoutToken))), 403);
  auto metrics = client.Get("/metrics", Bearer(kOpsToken));
  ASSERT_EQ(Status(metrics), 200);
  // The dashboard's page holds no data: it reads /metrics and /v1/top with a token.
  for (std::string_view open : {"/healthz", "/readyz", "/", "/ui/app.js"}) {
    EXPECT_EQ(Status(client.Get(std::string(open))), 200) << open;
  }
  // Failures so far: the missing tokens of /v1/check, /v1/auth and /v1/top, and one unknown.
  EXPECT_EQ(
      sluice::testing::MetricValue(metrics->body, R"(sluice_auth_refused_total{reason="missing"})"),
      3);
  EXPECT_EQ(
      sluice::testing::MetricValue(metrics->body, R"(sluice_auth_refused_total{reason="unknown"})"),
      1);
  EXPECT_EQ(
      sluice::testing::MetricValue(metrics->body, R"(sluice_auth_refused_total{reason="scope"})"),
      4);
  EXPECT_EQ(
      sluice::testing::MetricValue(metrics->body, R"(sluice_auth_refused_total{reason="rule"})"),
      1);
}

TEST(ServeCallersTest, ARefusedCallerMovesNoCount) {
  Service service(Config());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  ASSERT_EQ(Remaining(client, "api"), 5);
  ASSERT_EQ(Remaining(client, "other"), 5);

  // A batch naming one rule its caller may not use is refused whole: "api" is not counted either.
  const std::string batch = R"({"checks":[{"rule":"api","key":"k"},{"rule":"other","key":"k"}]})";
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kCheckoutToken), batch, "application/json")),
            403);
  EXPECT_EQ(Status(client.Post("/v1/check", batch, "application/json")), 401);
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kOpsToken), batch, "application/json")), 403);
  EXPECT_EQ(
      Status(client.Post("/v1/acquire", Bearer(kCheckoutToken),
                         R"({"rule":"other","key":"k","max_wait_ms":10})", "application/json")),
      403);
  EXPECT_EQ(Remaining(client, "api"), 5);
  EXPECT_EQ(Remaining(client, "other"), 5);

  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kOtherToken), batch, "application/json")), 200);
  EXPECT_EQ(Remaining(client, "api"), 4);
  EXPECT_EQ(Remaining(client, "other"), 4);
}

TEST(ServeCallersTest, FailedAuthenticationsAreThrottledPerPeerAndNoTokenIsLogged) {
  Service service(Config());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const std::string check = R"({"rule":"api","key":"k"})";
  constexpr std::string_view kGuess = "guessed-secret-token";

  // Ten failures within a second are each answered 401; then even a good token gets 429 (its
  // token not even hashed) until the second has passed. On a loaded machine the failures or the
  // good request may straddle a second's boundary: the attempt is then made again (bounded).
  int refused = 0;
  bool good_token_throttled = false;
  for (int attempt = 0; attempt < 3 && !good_token_throttled; ++attempt) {
    int failures = 0;
    bool throttled = false;
    for (int i = 0; i < 40 && !throttled; ++i) {
      const int status =
          Status(client.Post("/v1/check", Bearer(kGuess), check, "application/json"));
      if (status == 429) {
        throttled = true;
      } else {
        ASSERT_EQ(status, 401);
        ++failures;
      }
    }
    ASSERT_TRUE(throttled);
    if (attempt == 0) {
      ASSERT_GE(failures, 10);
    }
    refused += failures;
    auto good = client.Post("/v1/check", Bearer(kCheckoutToken), check, "application/json");
    ASSERT_TRUE(Status(good) == 429 || Status(good) == 200) << Status(good);
    if (Status(good) == 429) {
      good_token_throttled = true;
      EXPECT_EQ(good->get_header_value("Retry-After"), "1");
    }
  }
  EXPECT_TRUE(good_token_throttled);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kCheckoutToken), check, "application/json")),
            200);
  auto metrics = client.Get("/metrics", Bearer(kOpsToken));
  ASSERT_EQ(Status(metrics), 200);
  EXPECT_EQ(
      sluice::testing::MetricValue(metrics->body, R"(sluice_auth_refused_total{reason="unknown"})"),
      refused);
  EXPECT_GE(sluice::testing::MetricValue(metrics->body,
                                         R"(sluice_auth_refused_total{reason="throttled"})"),
            1);

  ASSERT_EQ(service.process().Stop(std::chrono::seconds(10)), 0);
  const std::string log = service.process().Log();
  for (std::string_view token : {kGuess, kCheckoutToken, kOpsToken}) {
    EXPECT_EQ(log.find(token), std::string::npos) << token << " in:\n" << log;
  }
}

TEST(ServeCallersTest, SighupSwapsTheTokens) {
  Service service(Config());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const std::string check = R"({"rule":"api","key":"k"})";
  ASSERT_EQ(Status(client.Post("/v1/check", Bearer(kCheckoutToken), check, "application/json")),
            200);

  service.WriteConfig(Config("348e9df2a42bd6e3c6356ca9c95c5f1fe9a6b3e5cd25f4ae58df0f09049c3209"));
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 2 rule(s)")) << service.process().Log();
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kCheckoutToken), check, "application/json")),
            401);
  EXPECT_EQ(Status(client.Post("/v1/check", Bearer(kNewToken), check, "application/json")), 200);
}

// POST /json needs the scope check, and a caller with `domains` may name only those: a refused
// request spends nothing of the other domain's limits (a limit of 1 a day, still whole after).
TEST(ServeCallersTest, JsonNeedsACallerOfItsDomain) {
  sluice::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::filesystem::create_directory(dir.File("rls"));
  for (std::string_view domain : {"shop", "billing"}) {
    sluice::testing::WriteFile(dir.File("rls/" + std::string(domain) + ".yaml"),
                               "domain: " + std::string(domain) +
                                   "\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, "
                                   "requests_per_unit: 1 }\n");
  }
  Service service("rls: {config_dir: \"" + dir.File("rls") + "\", watch: false}\n" + Config() +
                  "      - {name: shop, token_sha256: "
                  "\"348e9df2a42bd6e3c6356ca9c95c5f1fe9a6b3e5cd25f4ae58df0f09049c3209\", "
                  "scopes: [check], domains: [shop]}\n");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const auto body = [](std::string_view domains) {
    return "{" + std::string(domains) +
           R"(,"descriptors":[{"entries":[{"key":"user","value":"u"}]}]})";
  };
  EXPECT_EQ(Status(client.Post("/json", body(R"("domain":"billing")"), "application/json")), 401);
  EXPECT_EQ(Status(client.Post("/json", Bearer(kOpsToken), body(R"("domain":"billing")"),
                               "application/json")),
            403);
  EXPECT_EQ(Status(client.Post("/json", Bearer(kNewToken), body(R"("domain":"billing")"),
                               "application/json")),
            403);
  // Whichever of two "domain" fields a parser keeps, one names a domain not the caller's.
  EXPECT_EQ(Status(client.Post("/json", Bearer(kNewToken),
                               body(R"("domain":"shop","domain":"billing")"), "application/json")),
            403);
  EXPECT_EQ(Status(client.Post("/json", Bearer(kNewToken),
                               body(R"("domain":"billing","domain":"shop")"), "application/json")),
            403);
  EXPECT_EQ(Status(client.Post("/json", Bearer(kNewToken), body(R"("domain":"shop")"),
                               "application/json")),
            200);
  // billing's one request a day is still there, for a caller without a list of domains.
  EXPECT_EQ(Status(client.Post("/json", Bearer(kOtherToken), body(R"("domain":"billing")"),
                               "application/json")),
            200);
  EXPECT_EQ(Status(client.Post("/json", Bearer(kOtherToken), body(R"("domain":"billing")"),
                               "application/json")),
            429);
}

TEST(ServeCallersTest, WithoutAuthTheServiceIsOpenAsBefore) {
  Service service("rules:\n  - {name: api, algorithm: fixed_window, limit: 5, period: 1m}\n");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  EXPECT_EQ(Status(client.Post("/v1/check", R"({"rule":"api","key":"k"})", "application/json")),
            200);
  EXPECT_EQ(Status(client.Get("/metrics")), 200);
}

}  // namespace
