// Forward auth through real reverse proxies (Debian's nginx and Caddy), each running the shipped
// example (examples/nginx/sluice.conf, examples/caddy/Caddyfile) with its ports moved to free
// ones, in front of a trivial application (a server of the same proxy answering 200 "app") and
// of `sluice serve` (the binary under test, its path the first argument). The clients speak
// only to the proxy:
//   - 20 parallel requests under a rule of 5 per hour: exactly five reach the application, and
//     fifteen get 429 with Retry-After, every answer with sluice's RateLimit headers; through
//     nginx on the memory store and across two `sluice serve` processes (nginx balancing over
//     both) sharing one real Redis, and through Caddy on the memory store;
//   - with Redis killed, nginx's location of the fail_open rule keeps reaching the application
//     and that of the fail_closed rule answers 429 with Retry-After; never 500;
//   - every spelling of /login that the proxy routes to the login rule (percent-encoded letters,
//     doubled slashes, dot segments, a trailing slash) counts against the one limit of /login.
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

#include "support/raw_connection.h"
#include "support/redis_server.h"
#include "support/reverse_proxy.h"
#include "support/serve_process.h"

namespace {

using sluice::testing::FreeLoopbackPort;
using sluice::testing::LocalClient;
using sluice::testing::MetricValue;
using sluice::testing::RawExchange;
using sluice::testing::ReadFile;
using sluice::testing::RedisServer;
using sluice::testing::ReverseProxy;
using sluice::testing::Service;

// The examples' rules at 5 per hour, keyed on the client's address as the proxy forwards it,
// one fail_open and one fail_closed, denying with `deny_status` (nginx's auth_request needs 403).
std::string Rules(int deny_status) {
  return fmt::format(R"(forward_auth: {{trusted_proxies: [127.0.0.1]}}
rules:
  - {{name: per_client, algorithm: fixed_window, limit: 5, period: 1h, key: forwarded_for,
     deny_status: {0}, on_error: fail_open}}
  - {{name: login, algorithm: fixed_window, limit: 5, period: 1h, key: [forwarded_for, uri],
     deny_status: {0}, on_error: fail_closed}}
)",
                     deny_status);
}

// Polls /readyz until the service's store answers (bounded by 10 s), as a deployment gates
// traffic on readiness: a check sent while its connection to Redis is still being made would be
// the failure policy's to decide.
bool WaitReady(const Service& sluice) {
  httplib::Client client = sluice.Client();
  for (int i = 0; i < 500; ++i) {
    if (auto r = client.Get("/readyz"); r && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Replaces each of the `count` occurrences of `from` in `text`.
void Replace(std::string& text, const std::string& from, const std::string& to, int count = 1) {
  int found = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++found;
  }
  EXPECT_EQ(found, count) << "the example no longer has '" << from << "' " << count << " time(s)";
}

std::string Loopback(int port) { return "127.0.0.1:" + std::to_string(port); }

// A shipped example in front of the sluice processes on `sluice_ports`, and the application it
// protects.
class Proxy {
 public:
  // examples/nginx/sluice.conf.
  static Proxy Nginx(const std::vector<int>& sluice_ports) {
    Proxy proxy;
    std::string http = ReadFile(SLUICE_SOURCE_DIR "/examples/nginx/sluice.conf");
    std::string servers;
    for (int port : sluice_ports)
      servers += (servers.empty() ? "" : " server ") + Loopback(port) + ";";
    Replace(http, "server 127.0.0.1:8080;", "server " + servers);
    Replace(http, "server 127.0.0.1:9000;", "server " + Loopback(proxy.app_port_) + ";");
    Replace(http, "listen 127.0.0.1:8000;", "listen " + Loopback(proxy.port_) + ";");
    http += "\nserver {\n  listen " + Loopback(proxy.app_port_) +
            ";\n  location / { return 200 app; }\n}\n";
    // Up once the application answers: a request to port_ would count against the rule.
    proxy.process_ = ReverseProxy::StartNginx(SLUICE_NGINX, http, proxy.app_port_);
    return proxy;
  }

  // examples/caddy/Caddyfile.
  static Proxy Caddy(int sluice_port) {
    Proxy proxy;
    std::string caddyfile = ReadFile(SLUICE_SOURCE_DIR "/examples/caddy/Caddyfile");
    Replace(caddyfile, "127.0.0.1:8080", Loopback(sluice_port));
    Replace(caddyfile, "127.0.0.1:9000", Loopback(proxy.app_port_), 3);
    Replace(caddyfile, ":8000 {", ":" + std::to_string(proxy.port_) + " {");
    caddyfile +=
        "\n:" + std::to_string(proxy.app_port_) + " {\n\tbind 127.0.0.1\n\trespond app 200\n}\n";
    proxy.process_ = ReverseProxy::StartCaddy(SLUICE_CADDY, caddyfile, proxy.app_port_);
    return proxy;
  }

  bool up() const { return process_ != nullptr; }
  int port() const { return port_; }
  std::string Log() const { return process_ ? process_->Log() : ""; }

 private:
  Proxy() : port_(FreeLoopbackPort()), app_port_(FreeLoopbackPort()) {}

  int port_;
  int app_port_;
  std::unique_ptr<ReverseProxy> process_;
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

std::string Statuses(const std::map<int, int>& by_status) {
  std::string text;
  for (const auto& [status, n] : by_status) text += fmt::format("{}×{} ", n, status);
  return text;
}

// Five answers from the application and fifteen 429s with Retry-After and `denied_body`, all
// with the rule's RateLimit headers as sluice sent them.
void ExpectFiveOfTwenty(const std::vector<Answer>& answers, const Proxy& proxy,
                        const std::string& denied_body) {
  std::map<int, int> by_status;
  for (const Answer& a : answers) {
    ++by_status[a.status];
    EXPECT_EQ(a.policy, R"("per_client";q=5;w=3600)");
    EXPECT_TRUE(a.ratelimit.starts_with(R"("per_client";r=)")) << a.ratelimit;
    if (a.status == 200) {
      EXPECT_EQ(a.body, "app");
      EXPECT_EQ(a.retry_after, "");
    } else if (a.status == 429) {
      EXPECT_EQ(a.body, denied_body);
      EXPECT_GT(std::atoi(a.retry_after.c_str()), 0) << a.retry_after;
      EXPECT_LE(std::atoi(a.retry_after.c_str()), 3600) << a.retry_after;
      EXPECT_TRUE(a.ratelimit.starts_with(R"("per_client";r=0;)")) << a.ratelimit;
    }
  }
  EXPECT_EQ(by_status[200], 5);
  EXPECT_EQ(by_status[429], 15);
  EXPECT_EQ(by_status[200] + by_status[429], 20)
      << "answers by status: " << Statuses(by_status) << "\n"
      << proxy.Log();
}

// nginx's own denial (error_page), sluice's 403 mapped to 429.
const std::string kNginxDenial = "{\"error\":\"rate limit exceeded\"}\n";

TEST(ForwardAuthNginx, AdmitsFiveOfTwentyParallelRequestsOnTheMemoryStore) {
  Service sluice(Rules(403));
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  const Proxy proxy = Proxy::Nginx({sluice.port()});
  ASSERT_TRUE(proxy.up());

  ExpectFiveOfTwenty(GetInParallel(proxy.port(), "/", 20), proxy, kNginxDenial);
  // A HEAD is limited like a GET, and nginx's keep-alive connections to sluice stay usable after
  // one (a body left unread on one would spoil the next answer read from it).
  httplib::Client client = LocalClient(proxy.port());
  for (int i = 0; i < 3; ++i) {
    auto head = client.Head("/");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 429);
    EXPECT_NE(head->get_header_value("Retry-After"), "");
    const Answer get = Get(proxy.port(), "/");
    EXPECT_EQ(get.status, 429) << proxy.Log();
  }
  const std::string metrics = sluice.Client().Get("/metrics")->body;
  EXPECT_EQ(MetricValue(metrics, R"(sluice_checks_total{rule="per_client",result="allowed"})"), 5);
  EXPECT_EQ(MetricValue(metrics, R"(sluice_checks_total{rule="per_client",result="denied"})"), 21);
}

TEST(ForwardAuthNginx, AdmitsFiveOfTwentyAcrossTwoServesOnOneRedis) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  // Redis decides every check, even on a loaded machine: a check past the default 50 ms deadline
  // would be fail_open's to admit.
  Service first(Rules(403), redis->url(), "instances: 2, timeout_ms: 2000");
  Service second(Rules(403), redis->url(), "instances: 2, timeout_ms: 2000");
  ASSERT_TRUE(first.up()) << first.process().Log();
  ASSERT_TRUE(second.up()) << second.process().Log();
  ASSERT_TRUE(WaitReady(first));
  ASSERT_TRUE(WaitReady(second));
  const Proxy proxy = Proxy::Nginx({first.port(), second.port()});
  ASSERT_TRUE(proxy.up());

  ExpectFiveOfTwenty(GetInParallel(proxy.port(), "/", 20), proxy, kNginxDenial);
  // nginx balanced the checks over both; Redis decided each (or the hot-key cache, a key Redis
  // has just denied).
  int64_t total = 0;
  for (Service* sluice : {&first, &second}) {
    const std::string metrics = sluice->Client().Get("/metrics")->body;
    int64_t decided = 0;
    for (const char* source : {"store", "hot_key_cache"}) {
      decided += MetricValue(
          metrics,
          fmt::format(R"(sluice_decisions_total{{rule="per_client",source="{}"}})", source));
    }
    EXPECT_GT(decided, 0) << metrics << sluice->process().Log();
    total += decided;
  }
  EXPECT_EQ(total, 20);
}

TEST(ForwardAuthNginx, WhileRedisIsDownFailOpenAdmitsAndFailClosedDenies) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service sluice(Rules(403), redis->url(), "timeout_ms: 2000");  // Redis decides while up
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  ASSERT_TRUE(WaitReady(sluice));
  const Proxy proxy = Proxy::Nginx({sluice.port()});
  ASSERT_TRUE(proxy.up());
  EXPECT_EQ(Get(proxy.port(), "/").status, 200);
  EXPECT_EQ(Get(proxy.port(), "/login").status, 200);

  redis->Kill();
  for (int i = 0; i < 10; ++i) {
    const Answer open = Get(proxy.port(), "/");
    EXPECT_EQ(open.status, 200) << proxy.Log();
    EXPECT_EQ(open.body, "app");
    const Answer closed = Get(proxy.port(), "/login");
    EXPECT_EQ(closed.status, 429) << proxy.Log();
    EXPECT_GT(std::atoi(closed.retry_after.c_str()), 0) << closed.retry_after;
    EXPECT_TRUE(closed.ratelimit.starts_with(R"("login";r=0;)")) << closed.ratelimit;
  }
  const std::string metrics = sluice.Client().Get("/metrics")->body;
  EXPECT_EQ(MetricValue(metrics, R"(sluice_decisions_total{rule="per_client",source="fail_open"})"),
            10);
  EXPECT_EQ(MetricValue(metrics, R"(sluice_decisions_total{rule="login",source="fail_closed"})"),
            10);
}

// Caddy passes sluice's own denial to the client; the example adds sluice's RateLimit headers to
// the admitted requests' answers too.
TEST(ForwardAuthCaddy, AdmitsFiveOfTwentyParallelRequestsOnTheMemoryStore) {
  Service sluice(Rules(429));
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  const Proxy proxy = Proxy::Caddy(sluice.port());
  ASSERT_TRUE(proxy.up());

  ExpectFiveOfTwenty(GetInParallel(proxy.port(), "/", 20), proxy,
                     R"({"error":"rate limit exceeded"})");
}

// Spellings of /login a client may send, each routed by nginx and Caddy to their /login location
// and by an application to its /login handler: one path, so one limit.
std::vector<std::string> LoginSpellings() {
  std::vector<std::string> spellings = {
      "/%6cogin",    "/%6Cogin",   "/l%6fgin",   "/l%6Fgin", "/%6C%6F%67%69%6E", "/./login",
      "/a/../login", "/%2e/login", "/%2E/login", "/login/",  "/login/.",         "/login?x=1"};
  for (int slashes = 2; slashes <= 40; ++slashes) {
    spellings.push_back(std::string(slashes, '/') + "login");
  }
  return spellings;
}

// The status of a GET of `target`, sent as it is in the request line (an HTTP client library
// might re-encode it); 0 for no answer.
int RawGet(int port, const std::string& target) {
  const std::string answer = RawExchange(
      port, "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  if (!answer.starts_with("HTTP/1.1 ")) return 0;
  return std::atoi(answer.c_str() + 9);
}

// /login five times, then each spelling of it: every one is 429. A '%' encoding nothing is refused
// by the proxy itself (sluice would answer it 400: auth_test.cc).
void ExpectEverySpellingSharesTheLimitOfLogin(const Proxy& proxy, const Service& sluice) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(RawGet(proxy.port(), "/login"), 200) << proxy.Log();
  const std::vector<std::string> spellings = LoginSpellings();
  int admitted = 0;
  std::string not_denied;
  for (const std::string& spelling : spellings) {
    const int status = RawGet(proxy.port(), spelling);
    if (status == 429) continue;
    if (status == 200) ++admitted;
    not_denied += fmt::format("{} {}\n", status, spelling);
  }
  EXPECT_EQ(admitted, 0) << "admitted " << admitted << " of " << spellings.size()
                         << " spellings of /login past its limit of 5; not denied:\n"
                         << not_denied << proxy.Log();
  EXPECT_EQ(RawGet(proxy.port(), "/log%zzin"), 400);
  const std::string metrics = sluice.Client().Get("/metrics")->body;
  EXPECT_EQ(MetricValue(metrics, R"(sluice_checks_total{rule="login",result="allowed"})"), 5);
  EXPECT_EQ(MetricValue(metrics, R"(sluice_checks_total{rule="login",result="denied"})"),
            static_cast<int64_t>(spellings.size()));
}

TEST(ForwardAuthNginx, EverySpellingOfAPathSharesItsLimit) {
  Service sluice(Rules(403));
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  const Proxy proxy = Proxy::Nginx({sluice.port()});
  ASSERT_TRUE(proxy.up());
  ExpectEverySpellingSharesTheLimitOfLogin(proxy, sluice);
}

TEST(ForwardAuthCaddy, EverySpellingOfAPathSharesItsLimit) {
  Service sluice(Rules(429));
  ASSERT_TRUE(sluice.up()) << sluice.process().Log();
  const Proxy proxy = Proxy::Caddy(sluice.port());
  ASSERT_TRUE(proxy.up());
  ExpectEverySpellingSharesTheLimitOfLogin(proxy, sluice);
}

}  // namespace
