// `sluice serve` on a Redis Cluster, as a user runs it: the real binary (its path is the first
// argument of this test program) with `--store redis+cluster://...`, on a real 3-master cluster,
// spoken to over HTTP. Limits hold across requests, the state of keys spread over every
// master, and readiness reflects the cluster.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_cluster.h"

extern char** environ;

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string g_sluice;  // the binary under test

TEST(ServeClusterE2ETest, DecidesOnTheClusterWithStateOnEveryMaster) {
  auto cluster = sluice::testing::RedisCluster::Start();
  ASSERT_NE(cluster, nullptr);

  std::string dir = ::testing::TempDir() + "sluice_serve_cluster_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string config = dir + "/sluice.yaml", log = dir + "/serve.log";
  std::ofstream(config) << "store: {url: \"memory://\", timeout_ms: 200}\n"
                        << "rules:\n"
                        << "  - {name: api, algorithm: gcra, limit: 3, period: 1m}\n";
  const int port = sluice::testing::FreeLoopbackPort();
  std::vector<std::string> args = {
      g_sluice,  "serve",        "--config", config,
      "--store", cluster->url(), "--listen", "127.0.0.1:" + std::to_string(port)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, g_sluice.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  const auto serve_log = [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };

  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5s);
  client.set_read_timeout(5s);
  const auto up_until = std::chrono::steady_clock::now() + 10s;
  bool up = false;
  while (!up && std::chrono::steady_clock::now() < up_until) {
    auto r = client.Get("/healthz");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(up) << serve_log();
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;

  // 30 keys, each checked 4 times: 3 admitted, then refused, all decided by the cluster.
  for (int k = 0; k < 30; ++k) {
    const std::string body = R"({"rule":"api","key":"tenant-)" + std::to_string(k) + R"("})";
    for (int i = 0; i < 4; ++i) {
      auto r = client.Post("/v1/check", body, "application/json");
      ASSERT_TRUE(r) << "no answer";
      ASSERT_EQ(r->status, 200) << r->body;
      const json decision = json::parse(r->body);
      EXPECT_EQ(decision["allowed"], i < 3) << "key " << k << " check " << i << ": " << r->body;
      EXPECT_EQ(decision["source"], "store") << r->body;
    }
  }
  std::set<int> holding;
  for (int master : cluster->MasterPorts()) {
    const std::string keys = cluster->Cli(master, {"KEYS", "sluice:api:*"});
    if (keys.find("tenant-") != std::string::npos) holding.insert(master);
  }
  EXPECT_EQ(holding.size(), 3u) << "the keys' state spreads over every master";

  kill(pid, SIGTERM);
  int status = -1;
  const auto exit_until = std::chrono::steady_clock::now() + 10s;
  while (waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < exit_until) {
    std::this_thread::sleep_for(10ms);
  }
  if (!WIFEXITED(status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << serve_log();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PATH_TO_SLUICE_BINARY [gtest flags]\n";
    return 2;
  }
  g_sluice = argv[1];
  return RUN_ALL_TESTS();
}
