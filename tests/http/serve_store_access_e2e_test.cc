// How `sluice serve` reaches Redis, as a user runs it (the real binary, whose path is this
// program's first argument, on a real redis-server): through the user of docs/redis-acl.md with
// its password in a file and its keys under store.key_prefix; a password that never reaches a log
// line, whatever happens (no Redis, a wrong password, reloads, a refused reload); and a bad key
// prefix or password file refused with file, line and field, at start (nothing starts) and on
// SIGHUP (the running config stays).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/redis_acl.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::DocumentedAclSetUser;
using sluice::testing::FreeLoopbackPort;
using sluice::testing::Process;
using sluice::testing::RedisServer;
using sluice::testing::Service;
using sluice::testing::TempDir;
using sluice::testing::WriteFile;

constexpr char kPassword[] = "pw-7f3a9c-never-logged";

constexpr const char* kRules = R"(rules:
  - { name: api, algorithm: gcra, limit: 100, period: 1m, burst: 100, on_error: fail_open,
      lease: { units: 10, lifetime: 100ms } }
  - { name: login, algorithm: sliding_log, limit: 5, period: 1m, on_error: fail_closed }
  - { name: shaped, algorithm: gcra, limit: 10, period: 1s }
)";

int Status(httplib::Client& client, const std::string& path, const std::string& body) {
  auto r = body.empty() ? client.Get(path) : client.Post(path, body, "application/json");
  return r ? r->status : -1;
}

TEST(ServeStoreAccess, ServesThroughTheDocumentedUserWithItsPasswordInAFile) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  ASSERT_EQ(redis->Cli(DocumentedAclSetUser("sluice", kPassword, "billing:")), "OK");
  TempDir secrets;
  WriteFile(secrets.File("redis-password"), std::string(kPassword) + "\n");
  Service service(kRules, "redis://sluice@127.0.0.1:" + std::to_string(redis->port()),
                  "key_prefix: billing, password_file: " + secrets.File("redis-password"));
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();

  EXPECT_EQ(Status(client, "/readyz", ""), 200);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(Status(client, "/v1/check", R"({"rule":"api","key":"hot"})"), 200);
  }
  auto login = client.Post("/v1/check", R"({"rule":"login","key":"alice"})", "application/json");
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 200) << login->body;
  EXPECT_EQ(json::parse(login->body)["allowed"], true) << login->body;
  EXPECT_EQ(Status(client, "/v1/acquire", R"({"rule":"shaped","key":"k","max_wait_ms":500})"), 200);

  EXPECT_EQ(redis->Cli({"ACL", "LOG"}), "") << "Redis refused a command of sluice's";
  std::istringstream keys(redis->Cli({"KEYS", "*"}));
  int count = 0;
  for (std::string key; std::getline(keys, key); ++count) {
    EXPECT_TRUE(key.starts_with("billing:")) << key;
  }
  EXPECT_GT(count, 0);
  EXPECT_EQ(service.process().Log().find(kPassword), std::string::npos) << service.process().Log();
}

// Every line the service writes, while it cannot reach Redis, is refused by it, reloads and
// refuses a reload, holds no password: neither the URL's nor the file's.
TEST(ServeStoreAccess, ThePasswordIsNeverLogged) {
  auto redis = RedisServer::Start({"--requirepass", "the-right-one"});
  ASSERT_NE(redis, nullptr);
  TempDir secrets;
  const std::string password_file = secrets.File("redis-password");
  WriteFile(password_file, std::string(kPassword) + "\n");
  const std::string nowhere = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const std::string wrong = "127.0.0.1:" + std::to_string(redis->port());
  // The password in the URL, then in a file; Redis down, then refusing it (WRONGPASS).
  const std::string stores[][2] = {
      {"redis://sluice:" + std::string(kPassword) + "@" + nowhere, ""},
      {"redis://sluice@" + nowhere, "password_file: " + password_file},
      {"redis://:" + std::string(kPassword) + "@" + wrong, ""},
      {"redis+cluster://" + wrong, "password_file: " + password_file},
      {"redis://" + wrong, "password_file: " + password_file},
  };
  for (const auto& [url, fields] : stores) {
    SCOPED_TRACE(url + " " + fields);
    Service service(kRules, url, fields);
    ASSERT_TRUE(service.up()) << service.process().Log();
    httplib::Client client = service.Client();
    EXPECT_EQ(Status(client, "/readyz", ""), 503);
    EXPECT_EQ(Status(client, "/v1/check", R"({"rule":"api","key":"k"})"), 200);  // fail_open
    EXPECT_EQ(Status(client, "/v1/check", R"({"rule":"login","key":"k"})"), 200);
    service.process().Signal(SIGHUP);
    ASSERT_TRUE(service.process().WaitForLog("reloaded 3 rule(s)")) << service.process().Log();
    // A reload refused: the password file gone.
    WriteFile(
        service.config_path(),
        "store: {url: \"" + url + "\", password_file: /nonexistent/redis-password}\n" + kRules);
    service.process().Signal(SIGHUP);
    ASSERT_TRUE(service.process().WaitForLog("reload rejected")) << service.process().Log();
    EXPECT_EQ(Status(client, "/v1/check", R"({"rule":"api","key":"k"})"), 200);
    ASSERT_EQ(service.process().Stop(10s), 0) << service.process().Log();

    const std::string log = service.process().Log();
    EXPECT_EQ(log.find(kPassword), std::string::npos) << log;
    EXPECT_NE(log.find("serving on"), std::string::npos) << log;
  }

  // --check-config shows the store too.
  TempDir dir;
  WriteFile(dir.File("sluice.yaml"), "store: {url: \"redis://sluice:" + std::string(kPassword) +
                                         "@" + nowhere + "\"}\n" + kRules);
  Process check({"serve", "--check-config", dir.File("sluice.yaml")}, dir.File("check.log"));
  EXPECT_EQ(check.WaitExit(5s), 0) << check.Log();
  EXPECT_NE(check.Log().find("store redis://sluice:***@"), std::string::npos) << check.Log();
  EXPECT_EQ(check.Log().find(kPassword), std::string::npos) << check.Log();
}

// A key prefix with braces, or a password file that cannot be read: the config is refused with
// its file, line and field and nothing starts; sent by a SIGHUP, the running config stays.
TEST(ServeStoreAccess, ABadKeyPrefixOrPasswordFileIsRefused) {
  const std::string bad_stores[][2] = {
      {"key_prefix: \"app{1}\"",
       ":2: store.key_prefix: bad key prefix 'app{1}': must not contain "
       "'{' or '}'"},
      {"password_file: /nonexistent/redis-password",
       ":2: store.password_file: cannot open '/nonexistent/redis-password': No such file or "
       "directory"},
  };
  for (const auto& [field, error] : bad_stores) {
    SCOPED_TRACE(field);
    TempDir dir;
    const std::string config = dir.File("sluice.yaml");
    const int port = FreeLoopbackPort();
    WriteFile(config, "store:\n  " + field + "\n" + kRules);
    Process process({"serve", "--config", config, "--listen", "127.0.0.1:" + std::to_string(port)},
                    dir.File("serve.log"));
    EXPECT_EQ(process.WaitExit(5s), 2) << process.Log();
    EXPECT_NE(process.Log().find(config + error), std::string::npos) << process.Log();
    EXPECT_EQ(process.Log().find("serving on"), std::string::npos) << process.Log();

    Service service(kRules);
    ASSERT_TRUE(service.up()) << service.process().Log();
    WriteFile(service.config_path(), "store:\n  " + field + "\n" +
                                         "rules:\n  - { name: other, algorithm: gcra, limit: 1, "
                                         "period: 1s }\n");
    service.process().Signal(SIGHUP);
    ASSERT_TRUE(service.process().WaitForLog("reload rejected")) << service.process().Log();
    EXPECT_NE(service.process().Log().find(service.config_path() + error), std::string::npos)
        << service.process().Log();
    httplib::Client client = service.Client();
    EXPECT_EQ(Status(client, "/v1/check", R"({"rule":"api","key":"k"})"), 200);
    EXPECT_EQ(Status(client, "/v1/check", R"({"rule":"other","key":"k"})"), 400);
  }
}

}  // namespace
