// The operators' side of the real `sluice serve`: DELETE /v1/keys/{rule}/{key} on memory:// and
// on a real Redis (the key is admitted again, the others stay limited; 404, 401, 403; 503 while
// Redis is down, never 204), and server.admin_listen (the decision port answers the operators'
// endpoints 404 as it does an unknown path, the admin port the decisions; both authenticate; a
// reload keeps the address; an address equal to `listen` is refused).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>

#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using namespace std::chrono_literals;
using sluice::testing::FreeLoopbackPort;
using sluice::testing::LocalClient;
using sluice::testing::MetricValue;
using sluice::testing::Process;
using sluice::testing::RedisServer;
using sluice::testing::Service;
using sluice::testing::TempDir;

// The hashes are SHA-256 of the tokens (printf %s TOKEN | sha256sum).
constexpr std::string_view kCheckoutToken = "checkout-token";  // scopes: check
constexpr std::string_view kOpsToken = "ops-token";            // scopes: admin, metrics
constexpr std::string_view kScraperToken = "other-token";      // scopes: metrics
constexpr std::string_view kSupportToken = "support-token";    // scopes: admin, rules: other

constexpr std::string_view kRules = R"(rules:
  - {name: api, algorithm: fixed_window, limit: 2, period: 1h}
  - {name: other, algorithm: sliding_window, limit: 2, period: 1h}
)";

constexpr std::string_view kCallers = R"(  auth:
    callers:
      - {name: checkout, token_sha256: "f73b9044d0a39db82876ca2560ec62234efc73e2560689b5b5a3fc92f70904e3", scopes: [check]}
      - {name: ops, token_sha256: "d9310c002af91822beb0b3487d8b04f85bf6bf1f8a5496bff7d35fc7c5a29def", scopes: [admin, metrics]}
      - {name: scraper, token_sha256: "6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754", scopes: [metrics]}
      - {name: support, token_sha256: "ebca95604276a73fb41ea1ae6556b45bf815fa9733bc6e7a7be1316f9c3e8a89", scopes: [admin], rules: [other]}
)";

// A config with an admin address on `admin_port` (none when 0) and, when `auth`, the callers.
std::string Config(int admin_port, bool auth = true) {
  std::string server = "server:\n  expose_keys: true\n";
  if (admin_port != 0) server += "  admin_listen: 127.0.0.1:" + std::to_string(admin_port) + "\n";
  if (auth) server += kCallers;
  return server + std::string(kRules);
}

httplib::Headers Bearer(std::string_view token) {
  return {{"Authorization", "Bearer " + std::string(token)}};
}

int Status(const httplib::Result& r) { return r ? r->status : -1; }

// What a check of `rule`'s `key` would leave (a peek, cost 0), on the decision port; -1 if the
// check is not answered 200.
int64_t Remaining(httplib::Client& decisions, std::string_view rule, std::string_view key) {
  const std::string body = nlohmann::json{{"rule", rule}, {"key", key}, {"cost", 0}}.dump();
  auto r = decisions.Post("/v1/check", Bearer(kCheckoutToken), body, "application/json");
  if (Status(r) != 200) return -1;
  return nlohmann::json::parse(r->body).value("remaining", int64_t{-1});
}

// Spends every unit of `rule`'s `key`.
void Exhaust(httplib::Client& decisions, std::string_view rule, std::string_view key) {
  const std::string body = nlohmann::json{{"rule", rule}, {"key", key}, {"cost", 2}}.dump();
  auto r = decisions.Post("/v1/check", Bearer(kCheckoutToken), body, "application/json");
  ASSERT_EQ(Status(r), 200);
  ASSERT_EQ(nlohmann::json::parse(r->body).value("allowed", false), true) << r->body;
  ASSERT_EQ(Remaining(decisions, rule, key), 0);
}

// `sluice serve` with an admin port, retried on another pair of ports if another test took one.
struct AdminService {
  explicit AdminService(const std::string& store_url = "memory://", bool auth = true) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      admin_port = FreeLoopbackPort();
      service = std::make_unique<Service>(Config(admin_port, auth), store_url);
      if (service->up() &&
          service->process().WaitForLog("on 127.0.0.1:" + std::to_string(admin_port))) {
        WaitUntilReady();
        return;
      }
    }
  }
  // Until the store answers (/readyz), bounded by 10 s: a Redis connection is still being made
  // when the process starts answering.
  void WaitUntilReady() const {
    httplib::Client client = Admin();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (Status(client.Get("/readyz")) != 200 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
  }
  bool up() const { return service && service->up(); }
  httplib::Client Admin() const { return LocalClient(admin_port); }
  httplib::Client Decisions() const { return service->Client(); }
  std::string Log() const { return service->process().Log(); }

  int admin_port = 0;
  std::unique_ptr<Service> service;
};

class ServeResetTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "redis") {
      redis_ = RedisServer::Start();
      ASSERT_NE(redis_, nullptr);
    }
    service_ = std::make_unique<AdminService>(redis_ ? redis_->url() : "memory://");
    ASSERT_TRUE(service_->up()) << (service_->service ? service_->Log() : "");
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<AdminService> service_;
};

TEST_P(ServeResetTest, AResetKeyIsAdmittedAgainAndTheOthersStayLimited) {
  httplib::Client decisions = service_->Decisions();
  httplib::Client admin = service_->Admin();
  // A key with a '/' and a space, as a client sends it in its checks.
  const std::string key = "user/42 eu";
  const std::string path = "/v1/keys/api/user%2F42%20eu";
  Exhaust(decisions, "api", key);
  Exhaust(decisions, "api", "user:7");
  Exhaust(decisions, "other", key);

  // Nobody but a caller with the admin scope resets anything.
  EXPECT_EQ(Status(admin.Delete(path)), 401);
  EXPECT_EQ(Status(admin.Delete(path, Bearer("not-a-caller"))), 401);
  EXPECT_EQ(Status(admin.Delete(path, Bearer(kCheckoutToken))), 403);
  EXPECT_EQ(Status(admin.Delete(path, Bearer(kScraperToken))), 403);
  EXPECT_EQ(Remaining(decisions, "api", key), 0);
  // A caller given rules resets keys of those only.
  EXPECT_EQ(Status(admin.Delete(path, Bearer(kSupportToken))), 403);
  EXPECT_EQ(Remaining(decisions, "api", key), 0);
  EXPECT_EQ(Status(admin.Delete("/v1/keys/nope/x", Bearer(kOpsToken))), 404);
  EXPECT_EQ(Status(admin.Get(path, Bearer(kOpsToken))), 405);
  EXPECT_EQ(Status(admin.Delete("/v1/keys/api/user/42", Bearer(kOpsToken))), 400);
  EXPECT_EQ(Status(admin.Delete("/v1/keys/api/", Bearer(kOpsToken))), 400);
  EXPECT_EQ(Status(admin.Delete("/v1/keys/api/" + std::string(513, 'k'), Bearer(kOpsToken))), 400);

  auto reset = admin.Delete(path, Bearer(kOpsToken));
  ASSERT_EQ(Status(reset), 204) << (reset ? reset->body : "");
  EXPECT_EQ(reset->body, "");
  EXPECT_EQ(Remaining(decisions, "api", key), 2);
  EXPECT_EQ(Remaining(decisions, "api", "user:7"), 0);
  EXPECT_EQ(Remaining(decisions, "other", key), 0);
  // A key the store does not hold is reset all the same.
  EXPECT_EQ(Status(admin.Delete("/v1/keys/other/never-seen", Bearer(kSupportToken))), 204);

  auto metrics = admin.Get("/metrics", Bearer(kScraperToken));
  ASSERT_EQ(Status(metrics), 200);
  EXPECT_EQ(MetricValue(metrics->body, R"(sluice_key_resets_total{rule="api"})"), 1);
  EXPECT_EQ(MetricValue(metrics->body, R"(sluice_key_resets_total{rule="other"})"), 1);

  // The log says who reset which rule's key, by its hash: never a token, nor the key.
  ASSERT_TRUE(service_->service->process().WaitForLog("of rule 'api' by caller 'ops' at 127.0.0.1"))
      << service_->Log();
  const std::string log = service_->Log();
  for (std::string_view secret :
       {kOpsToken, kCheckoutToken, kScraperToken, kSupportToken, std::string_view("user/42")}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << secret << " in:\n" << log;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, ServeResetTest, ::testing::Values("memory", "redis"),
                         [](const auto& info) { return info.param; });

TEST(ServeResetOutageTest, AResetWhileRedisIsDownIs503NotNoContent) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  AdminService service(redis->url());
  ASSERT_TRUE(service.up()) << (service.service ? service.Log() : "");
  httplib::Client admin = service.Admin();
  ASSERT_EQ(Status(admin.Delete("/v1/keys/api/k", Bearer(kOpsToken))), 204);

  redis->Kill();
  for (int i = 0; i < 3; ++i) {
    auto r = admin.Delete("/v1/keys/api/k", Bearer(kOpsToken));
    ASSERT_EQ(Status(r), 503) << (r ? r->body : "");
    EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  }
  auto metrics = admin.Get("/metrics", Bearer(kOpsToken));
  ASSERT_EQ(Status(metrics), 200);
  EXPECT_EQ(MetricValue(metrics->body, R"(sluice_key_resets_total{rule="api"})"), 1);
}

TEST(ServeAdminListenTest, EachPortServesItsOwnEndpointsAndAnswersTheOthersAsUnknown) {
  AdminService service;
  ASSERT_TRUE(service.up()) << (service.service ? service.Log() : "");
  httplib::Client decisions = service.Decisions();
  httplib::Client admin = service.Admin();
  const std::string check = R"({"rule":"api","key":"k"})";

  // The decision port: what a scan finds of the operators' endpoints is what it finds of a path
  // that does not exist, with a token or without.
  auto unknown = decisions.Get("/no-such-path");
  ASSERT_EQ(Status(unknown), 404);
  for (std::string_view path : {"/metrics", "/v1/top", "/", "/ui", "/ui/app.js"}) {
    for (const httplib::Headers& headers : {httplib::Headers{}, Bearer(kOpsToken)}) {
      auto r = decisions.Get(std::string(path), headers);
      EXPECT_EQ(Status(r), 404) << path;
      if (r) {
        EXPECT_EQ(r->body, unknown->body) << path;
      }
    }
  }
  EXPECT_EQ(Status(decisions.Delete("/v1/keys/api/k", Bearer(kOpsToken))), 404);
  EXPECT_EQ(Status(decisions.Post("/v1/check", check, "application/json")), 401);
  EXPECT_EQ(Status(decisions.Post("/v1/check", Bearer(kCheckoutToken), check, "application/json")),
            200);

  // The admin port: no decisions.
  auto admin_unknown = admin.Get("/no-such-path");
  ASSERT_EQ(Status(admin_unknown), 404);
  for (std::string_view path : {"/v1/check", "/v1/acquire", "/json"}) {
    auto r = admin.Post(std::string(path), Bearer(kCheckoutToken), check, "application/json");
    EXPECT_EQ(Status(r), 404) << path;
    if (r) {
      EXPECT_EQ(r->body, admin_unknown->body) << path;
    }
  }
  EXPECT_EQ(Status(admin.Get("/v1/auth/api", Bearer(kCheckoutToken))), 404);
  EXPECT_EQ(Status(admin.Get("/metrics")), 401);
  EXPECT_EQ(Status(admin.Get("/metrics", Bearer(kCheckoutToken))), 403);
  EXPECT_EQ(Status(admin.Get("/metrics", Bearer(kOpsToken))), 200);
  EXPECT_EQ(Status(admin.Get("/v1/top", Bearer(kOpsToken))), 200);
  for (std::string_view path : {"/", "/ui/app.js"}) {
    EXPECT_EQ(Status(admin.Get(std::string(path))), 200) << path;
  }

  for (httplib::Client* client : {&decisions, &admin}) {
    EXPECT_EQ(Status(client->Get("/healthz")), 200);
    EXPECT_EQ(Status(client->Get("/readyz")), 200);
  }
}

TEST(ServeAdminListenTest, WithoutItOnePortServesEverythingAndResetsNeedNoTokenWithoutAuth) {
  Service service(Config(/*admin_port=*/0, /*auth=*/false));
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  ASSERT_EQ(
      Status(client.Post("/v1/check", R"({"rule":"api","key":"k","cost":2})", "application/json")),
      200);
  EXPECT_EQ(Status(client.Get("/metrics")), 200);
  EXPECT_EQ(Status(client.Get("/")), 200);
  EXPECT_EQ(Status(client.Delete("/v1/keys/api/k")), 204);
  EXPECT_TRUE(service.process().WaitForLog("of rule 'api' by an unauthenticated caller at"))
      << service.process().Log();
}

TEST(ServeAdminListenTest, AReloadThatMovesItKeepsTheRunningAddress) {
  AdminService service;
  ASSERT_TRUE(service.up()) << (service.service ? service.Log() : "");
  const int moved_to = FreeLoopbackPort();
  service.service->WriteConfig(Config(moved_to));
  service.service->process().Signal(SIGHUP);
  ASSERT_TRUE(service.service->process().WaitForLog("server.admin_listen")) << service.Log();
  httplib::Client admin = service.Admin();
  EXPECT_EQ(Status(admin.Get("/metrics", Bearer(kOpsToken))), 200);
  EXPECT_EQ(Status(LocalClient(moved_to).Get("/healthz")), -1);
}

TEST(ServeAdminListenTest, AnAddressEqualToListenIsRefusedWithItsLine) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string config = dir.File("sluice.yaml");
  sluice::testing::WriteFile(
      config,
      "listen: 127.0.0.1:18080\nserver:\n  admin_listen: 127.0.0.1:18080\n" + std::string(kRules));
  Process check({"serve", "--check-config", config}, dir.File("check.log"));
  EXPECT_EQ(check.WaitExit(10s), 2);
  EXPECT_NE(check.Log().find(config + ":3: server.admin_listen: must differ from listen"),
            std::string::npos)
      << check.Log();

  // --listen moving the decision port onto the admin address is refused too.
  sluice::testing::WriteFile(config,
                             "server:\n  admin_listen: 127.0.0.1:18081\n" + std::string(kRules));
  Process serve({"serve", "--config", config, "--listen", "127.0.0.1:18081"},
                dir.File("serve.log"));
  EXPECT_EQ(serve.WaitExit(10s), 2);
  EXPECT_NE(serve.Log().find("server.admin_listen"), std::string::npos) << serve.Log();
}

}  // namespace
