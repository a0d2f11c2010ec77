// Forward auth through a real nginx (Debian's): examples/nginx/sluice.conf as shipped, its ports
// moved to free ones, in front of a trivial application (an nginx server answering 200 "app")
// and of `sluice serve` (the binary under test, its path the first argument). The clients speak
// only to nginx:
//   - 20 parallel requests under a rule of 5 per hour: exactly five reach the application, and
//     fifteen get 429 with Retry-After, every answer with sluice's RateLimit headers; on the
//     memory store, and across two `sluice serve` processes (nginx balancing over both) sharing
//     one real Redis;
//   - with Redis killed, the fail_open rule's location keeps reaching the application and the
//     fail_closed rule's answers 429 with Retry-After; nginx never answers 500.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/nginx.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using sluice::testing::FreeLoopbackPort;
using sluice::testing::LocalClient;
using sluice::testing::MetricValue;
using sluice::testing::Nginx;
using sluice::testing::ReadFile;
using sluice::testing::RedisServer;
using sluice::testing::Service;

// The example's rules at 5 per hour, keyed on the client's address as nginx forwards it.
std::string Rules(std::string_view per_client_on_error = "fail_open") {
  return std::string(R"(forward_auth: {trusted_proxies: [127.0.0.1]}
rules:
  - {name: per_client, algorithm: fixed_window, limit: 5, period: 1h, key: forwarded_for,
     deny_status: 403, on_error: )") +
         std::string(per_client_on_error) + R"(}
  - {name: login, algorithm: fixed_window, limit: 5, period: 1h, key: [forwarded_for, uri],
     deny_status: 403, on_error: fail_closed}
)";
}

// Replaces the one occurrence of `from` in `text`.
void ReplaceOnce(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "the example no longer has '" << from << "'";
  ASSERT_EQ(text.find(from, at + 1), std::string::npos) << "'" << from << "' twice";
  text.replace(at, from.size(), to);
}

// examples/nginx/sluice.conf in front of the sluice processes on `sluice_ports`, and the
// application it protects.
class Proxy {
 public:
  explicit Proxy(const std::vector<int>& sluice_ports) : port_(FreeLoopbackPort()) {
    const int app_port = FreeLoopbackPort();
    std::string http = ReadFile(SLUICE_SOURCE_DIR "/examples/nginx/sluice.conf");
    std::string servers;
    for (int port : sluice_ports) {
      servers += (servers.empty() ? "" : " server ") + std::string("127.0.0.1:") +
                 std::to_string(port) + ";";
    }
    ReplaceOnce(http, "server 127.0.0.1:8080;", "server " + servers);
    ReplaceOnce(http, "server 127.0.0.1:9000;",
                "server 127.0.0.1:" + std::to_string(app_port) + ";");
    ReplaceOnce(http, "listen 127.0.0.1:8000;", "listen 127.0.0.1:" + std::to_string(port_) + ";");
    http += "\nserver {\n  listen 127.0.0.1:" + std::to_string(app_port) +
            ";\n  location / { return 200 \"app\\n\"; }\n}\n";
    // Up once the application answers: a request to port_ would count against the rule.
    nginx_ = Nginx::Start(SLUICE_NGINX, http, app_port);
  }

  bool up() const { return nginx_ != nullptr; }
  int port() const { return port_; }
  std::string ErrorLog() const { return nginx_ ? nginx_->ErrorLog() : ""; }

 private:
  int port_;
  std::unique_ptr<Nginx> nginx_;
};

struct Answer {
  int status = 0;  // 0: no answer
  std::string body;
  std::string retry_after;
  std::string ratelimit;
  std::string policy;
};

Answer Get(int port, const std::string& path) {
  httplib::Client client = LocalClient(port);
  Answer answer;
  if (auto r = client.Get(path)) {
    answer = {r->status, r->body, r->get_header_value("Retry-After"),
              r->get_header_value("RateLimit"), r->get_header_value("RateLimit-Policy")};
  }
  return answer;
}

// `n` GETs of `path` at once, each on a connection of its own.
std::vector<Answer> GetInParallel(int port, const std::string& path, int n) {
  std::vector<Answer> answers(n);
  std::atomic<int> ready{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      answers[i] = Get(port, path);
    });
  }
  for (auto& client : clients) client.join();
  return answers;
}

// Five answers from the application and fifteen 429s with Retry-After, all with the rule's
// RateLimit headers as sluice sent them.
void ExpectFiveOfTwenty(const std::vector<Answer>& answers, const Proxy& proxy) {
  std::map<int, int> by_status;
  for (const Answer& a : answers) {
    ++by_status[a.status];
    EXPECT_EQ(a.policy, R"("per_client";q=5;w=3600)");
    EXPECT_TRUE(a.ratelimit.starts_with(R"("per_client";r=)")) << a.ratelimit;
    if (a.status == 200) {
      EXPECT_EQ(a.body, "app\n");
      EXPECT_EQ(a.retry_after, "");
    } else if (a.status == 429) {
      EXPECT_EQ(a.body, "{\"error\":\"rate limit exceeded\"}\n");
      EXPECT_GT(std::atoi(a.retry_after.c_str()), 0) << a.retry_after;
      EXPECT_LE(std::atoi(a.retry_after.c_str()), 3600) << a.retry_after;
      EXPECT_TRUE(a.ratelimit.starts_with(R"("per_client";r=0;)")) << a.ratelimit;
    }
  }
  EXPECT_EQ(by_status[200], 5);
  EXPECT_EQ(by_status[429], 15);
  EXPECT_EQ(by_status[200] + by_status[429], 20) << proxy.ErrorLog();
}

TEST(ForwardAuthNginx, AdmitsFiveOfTwentyParallelRequestsOnTheMemoryStore) {
  Service sluice(Rules());
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  Proxy proxy({sluice.port()});
  ASSERT_TRUE(proxy.up());

  ExpectFiveOfTwenty(GetInParallel(proxy.port(), "/", 20), proxy);
  const std::string metrics = sluice.Client().Get("/metrics")->body;
  EXPECT_EQ(MetricValue(metrics, R"(sluice_checks_total{rule="per_client",result="allowed"})"), 5);
  EXPECT_EQ(MetricValue(metrics, R"(sluice_checks_total{rule="per_client",result="denied"})"), 15);
}

TEST(ForwardAuthNginx, AdmitsFiveOfTwentyAcrossTwoServesOnOneRedis) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service first(Rules(), redis->url(), "instances: 2");
  Service second(Rules(), redis->url(), "instances: 2");
  ASSERT_TRUE(first.up()) << first.process().Log();
  ASSERT_TRUE(second.up()) << second.process().Log();
  Proxy proxy({first.port(), second.port()});
  ASSERT_TRUE(proxy.up());

  ExpectFiveOfTwenty(GetInParallel(proxy.port(), "/", 20), proxy);
  // nginx balanced the checks over both; Redis decided each (or the hot-key cache, a key Redis
  // has just denied).
  int64_t total = 0;
  for (const Service* sluice : {&first, &second}) {
    const std::string metrics = sluice->Client().Get("/metrics")->body;
    int64_t decided = 0;
    for (const char* source : {"store", "hot_key_cache"}) {
      decided += MetricValue(
          metrics,
          fmt::format(R"(sluice_decisions_total{{rule="per_client",source="{}"}})", source));
    }
    EXPECT_GT(decided, 0);
    total += decided;
  }
  EXPECT_EQ(total, 20);
}

TEST(ForwardAuthNginx, WhileRedisIsDownFailOpenAdmitsAndFailClosedDenies) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service sluice(Rules("fail_open"), redis->url());
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  Proxy proxy({sluice.port()});
  ASSERT_TRUE(proxy.up());
  EXPECT_EQ(Get(proxy.port(), "/").status, 200);
  EXPECT_EQ(Get(proxy.port(), "/login").status, 200);

  redis->Kill();
  for (int i = 0; i < 10; ++i) {
    const Answer open = Get(proxy.port(), "/");
    EXPECT_EQ(open.status, 200) << proxy.ErrorLog();
    EXPECT_EQ(open.body, "app\n");
    const Answer closed = Get(proxy.port(), "/login");
    EXPECT_EQ(closed.status, 429) << proxy.ErrorLog();
    EXPECT_GT(std::atoi(closed.retry_after.c_str()), 0) << closed.retry_after;
    EXPECT_TRUE(closed.ratelimit.starts_with(R"("login";r=0;)")) << closed.ratelimit;
  }
  const std::string metrics = sluice.Client().Get("/metrics")->body;
  EXPECT_EQ(MetricValue(metrics, R"(sluice_decisions_total{rule="per_client",source="fail_open"})"),
            10);
  EXPECT_EQ(MetricValue(metrics, R"(sluice_decisions_total{rule="login",source="fail_closed"})"),
            10);
}

}  // namespace
