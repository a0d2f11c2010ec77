// `sluice serve` as a user runs it: the real binary (its path is the first argument of this test
// program) on a free loopback port with a temporary config, spoken to over real HTTP.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/raw_connection.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::testing::LocalClient;
using sluice::testing::Process;
using sluice::testing::RawConnection;
using sluice::testing::RawExchange;
using sluice::testing::RawPost;
using sluice::testing::Service;
using sluice::testing::TempDir;
using sluice::testing::WaitUntilUp;
using sluice::testing::WriteFile;

// The value of the /metrics line of `series` (a name and its labels), or -1.
int64_t MetricValue(int port, std::string_view series) {
  httplib::Client client = LocalClient(port);
  auto r = client.Get("/metrics");
  return r ? sluice::testing::MetricValue(r->body, series) : -1;
}

// Polls /metrics until `series` has `value` (bounded by 10 s).
bool WaitForMetric(int port, std::string_view series, int64_t value) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (MetricValue(port, series) != value) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

constexpr const char* kRules = R"(rules:
  - { name: api, algorithm: gcra, limit: 100, period: 1m }
  - { name: slow, algorithm: gcra, limit: 1, period: 10s }
)";

json Body(const httplib::Result& r) { return json::parse(r->body, nullptr, false); }

TEST(ServeE2ETest, AnswersChecksWithRateLimitHeaders) {
  Service service(kRules);
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();

  auto r =
      client.Post("/v1/check", R"({"rule":"api","key":"user:42","cost":1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Body(r), json::parse(R"({"allowed":true,"limit":100,"remaining":99,
                                    "retry_after_ms":0,"reset_after_ms":600,
                                    "source":"store","degraded":false})"));
  EXPECT_EQ(r->get_header_value("RateLimit-Policy"), R"("api";q=100;w=60)");
  EXPECT_EQ(r->get_header_value("RateLimit"), R"("api";r=99;t=1)");
  EXPECT_FALSE(r->has_header("Retry-After"));

  ASSERT_EQ(client.Post("/v1/check", R"({"rule":"slow","key":"k"})", "application/json")->status,
            200);
  auto denied = client.Post("/v1/check", R"({"rule":"slow","key":"k"})", "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 200);
  EXPECT_EQ(Body(denied)["allowed"], false);
  EXPECT_EQ(denied->get_header_value("Retry-After"), "10");
  EXPECT_EQ(denied->get_header_value("RateLimit"), R"("slow";r=0;t=10)");

  auto batch = client.Post("/v1/check",
                           R"({"checks":[{"rule":"api","key":"user:42"},{"rule":"nope","key":"x"},
                                         {"rule":"slow","key":"other"}]})",
                           "application/json");
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->status, 200);
  const json results = Body(batch)["results"];
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0]["remaining"], 98);
  EXPECT_EQ(results[1], json::parse(R"({"error":"unknown rule 'nope'"})"));
  EXPECT_EQ(results[2]["allowed"], true);

  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("sluice_checks_total{rule=\"slow\",result=\"denied\"} 1\n"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("sluice_checks_total{rule=\"api\",result=\"allowed\"} 2\n"),
            std::string::npos);
}

TEST(ServeE2ETest, RefusesBadRequests) {
  Service service(kRules);
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();

  auto unknown = client.Post("/v1/check", R"({"rule":"nope","key":"k"})", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 400);
  EXPECT_EQ(Body(unknown), json::parse(R"({"error":"unknown rule 'nope'"})"));

  auto malformed = client.Post("/v1/check", "{", "application/json");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);

  auto missing = client.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  auto wrong_method = client.Get("/v1/check");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");

  httplib::Client fresh = service.Client();
  auto too_large = fresh.Post("/v1/check", std::string(70 * 1024, 'x'), "application/json");
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->status, 413);
  EXPECT_EQ(Body(too_large),
            json::parse(R"({"error":"request body is above the maximum of 65536 bytes"})"));

  httplib::Client another = service.Client();
  auto big_header = another.Get("/healthz", {{"X-Padding", std::string(9000, 'p')}});
  ASSERT_TRUE(big_header);
  EXPECT_EQ(big_header->status, 431);

  EXPECT_TRUE(RawExchange(service.port(), "NOT HTTP AT ALL\r\n\r\n")
                  .starts_with("HTTP/1.1 400 Bad Request"));

  // Still serving, and none of the above touched a limit.
  auto peek = client.Post("/v1/check", R"({"rule":"slow","key":"k","cost":0})", "application/json");
  ASSERT_TRUE(peek);
  EXPECT_EQ(peek->get_header_value("RateLimit"), R"("slow";r=1;t=0)");
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  for (std::string_view line : {"sluice_http_requests_total{code=\"400\"} 3\n",
                                "sluice_http_requests_total{code=\"404\"} 1\n",
                                "sluice_http_requests_total{code=\"405\"} 1\n",
                                "sluice_http_requests_total{code=\"413\"} 1\n",
                                "sluice_http_requests_total{code=\"431\"} 1\n"}) {
    EXPECT_NE(metrics->body.find(line), std::string::npos) << line << metrics->body;
  }
}

// "GET /healthz" with `fields` header fields in all (Host and Connection among them), each of the
// others with a value of `value_bytes`; then padded by one field more, if need be, so that the
// request line and the header together are at least `bytes` long.
std::string RequestHead(size_t fields, size_t value_bytes = 1, size_t bytes = 0) {
  std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  for (size_t i = 2; i < fields; ++i) {
    head += "X-F" + std::to_string(i) + ": " + std::string(value_bytes, 'v') + "\r\n";
  }
  head += "\r\n";
  if (head.size() + 9 < bytes) {
    head.insert(head.size() - 2, "X-Pad: " + std::string(bytes - head.size() - 9, 'p') + "\r\n");
  }
  return head;
}

std::string StatusLineOf(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

TEST(ServeE2ETest, HeaderBoundsCountTheWholeHeaderAndItsFields) {
  Service service(kRules);
  ASSERT_TRUE(service.up()) << service.process().Log();
  const int port = service.port();

  // 8 KiB in all, the request line included, and 100 fields: the most that is read.
  const std::string at_bytes = RequestHead(2, 1, 8192);
  ASSERT_EQ(at_bytes.size(), 8192u);
  EXPECT_EQ(StatusLineOf(RawExchange(port, at_bytes)), "HTTP/1.1 200 OK");
  const std::string at_fields = RequestHead(100);
  EXPECT_EQ(StatusLineOf(RawExchange(port, at_fields)), "HTTP/1.1 200 OK");

  // One byte more, one field more.
  const std::string over_bytes = RequestHead(2, 1, 8193);
  ASSERT_EQ(over_bytes.size(), 8193u);
  const std::string over_bytes_answer = RawExchange(port, over_bytes);
  EXPECT_EQ(StatusLineOf(over_bytes_answer), "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_NE(over_bytes_answer.find("request header is above the maximum of 8192 bytes"),
            std::string::npos)
      << over_bytes_answer;
  const std::string over_fields_answer = RawExchange(port, RequestHead(101));
  EXPECT_EQ(StatusLineOf(over_fields_answer), "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_NE(over_fields_answer.find("request header has more than 100 fields"), std::string::npos)
      << over_fields_answer;

  // Fewer than 100 fields, 11.5 KB, sent at once or in pieces: each field is small, the header
  // is not. (Beast's own header_limit bounds what is left to parse once a first piece is parsed,
  // which let a header of up to 12 KB through when sent at once.)
  const std::string many_small = RequestHead(60, 190);
  ASSERT_GT(many_small.size(), 11500u);
  const std::string many_small_answer = RawExchange(port, many_small);
  EXPECT_EQ(StatusLineOf(many_small_answer), "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_NE(many_small_answer.find("request header is above the maximum of 8192 bytes"),
            std::string::npos)
      << many_small_answer;
  EXPECT_EQ(StatusLineOf(RawExchange(port, RequestHead(1587, 1, 16372))),
            "HTTP/1.1 431 Request Header Fields Too Large");
  {
    RawConnection connection(port);
    ASSERT_TRUE(connection.connected());
    bool sent = true;
    for (size_t at = 0; at < many_small.size() && sent; at += 1024) {
      sent = connection.Send(std::string_view(many_small).substr(at, 1024));
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(StatusLineOf(connection.ReadToEnd()), "HTTP/1.1 431 Request Header Fields Too Large");
  }
  // One field above the bound.
  EXPECT_EQ(StatusLineOf(RawExchange(
                port, "GET /healthz HTTP/1.1\r\nX-Big: " + std::string(9000, 'b') + "\r\n\r\n")),
            "HTTP/1.1 431 Request Header Fields Too Large");

  // Still serving, and a request within the bounds on a kept-alive connection after others.
  httplib::Client client = service.Client();
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(MetricValue(port, "sluice_http_requests_total{code=\"431\"}"), 6);
}

TEST(ServeE2ETest, ABodyWithAKeyTwiceIs400NamingItAndChangesNothing) {
  Service service(kRules);
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  // Read last-wins, a check of cost 1 would be a peek.
  auto check = client.Post("/v1/check", R"({"rule":"slow","key":"k","cost":1,"cost":0})",
                           "application/json");
  ASSERT_TRUE(check);
  EXPECT_EQ(check->status, 400);
  EXPECT_EQ(Body(check)["error"], "duplicate key 'cost': each key may appear once in an object");
  auto batch = client.Post("/v1/check", R"({"checks":[{"rule":"slow","key":"k","key":"j"}]})",
                           "application/json");
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->status, 400);
  EXPECT_EQ(Body(batch)["error"], "duplicate key 'key': each key may appear once in an object");
  auto acquire =
      client.Post("/v1/acquire", R"({"rule":"slow","key":"k","max_wait_ms":0,"max_wait_ms":10})",
                  "application/json");
  ASSERT_TRUE(acquire);
  EXPECT_EQ(acquire->status, 400);
  EXPECT_EQ(Body(acquire)["error"],
            "duplicate key 'max_wait_ms': each key may appear once in an object");
  // Nothing was taken from the key.
  auto peek = client.Post("/v1/check", R"({"rule":"slow","key":"k","cost":0})", "application/json");
  ASSERT_TRUE(peek);
  EXPECT_EQ(peek->get_header_value("RateLimit"), R"("slow";r=1;t=0)");
}

TEST(ServeE2ETest, AnswersPipelinedRequestsInOrderOnOneConnection) {
  Service service(kRules);
  ASSERT_TRUE(service.up()) << service.process().Log();
  const std::string post = RawPost("/v1/check", R"({"rule":"slow","key":"p"})");
  const std::string out =
      RawExchange(service.port(),
                  post + post + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const size_t first = out.find(R"({"allowed":true)");
  const size_t second = out.find(R"({"allowed":false)");
  const size_t health = out.find(R"({"status":"ok"})");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  ASSERT_NE(health, std::string::npos) << out;
  EXPECT_LT(first, second);
  EXPECT_LT(second, health);
}

TEST(ServeE2ETest, OnRedisEachRuleFailsByItsPolicyAndRedisTakesOverAgainWhenBack) {
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(R"(rules:
  - { name: slow, algorithm: gcra, limit: 1, period: 10s }
  - { name: closed, algorithm: gcra, limit: 1, period: 10s, on_error: fail_closed }
  - { name: local, algorithm: fixed_window, limit: 4, period: 1h, on_error: local_fallback }
)",
                  redis->url(), "instances: 2");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const auto check = [&](std::string_view rule, std::string_view key = "k") {
    auto r = client.Post(
        "/v1/check",
        R"({"rule":")" + std::string(rule) + R"(","key":")" + std::string(key) + R"("})",
        "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return Body(r);
  };
  const auto get = [&](const char* path) {
    auto r = client.Get(path);
    EXPECT_TRUE(r) << path;
    return r;
  };
  EXPECT_EQ(check("slow"), json::parse(R"({"allowed":true,"limit":1,"remaining":0,
      "retry_after_ms":0,"reset_after_ms":10000,"source":"store","degraded":false})"));
  EXPECT_EQ(check("slow")["allowed"], false);  // the state is in Redis
  auto ready = get("/readyz");
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(Body(ready), json::parse(R"({"status":"ready","breaker":"closed"})"));

  redis->Kill();
  const json cached = check("slow");  // "k" is over its limit: known without asking Redis
  EXPECT_EQ(cached["allowed"], false);
  EXPECT_EQ(cached["source"], "hot_key_cache");
  const json open = check("slow", "other");
  EXPECT_EQ(open["allowed"], true);
  EXPECT_EQ(open["source"], "fail_open");
  EXPECT_EQ(open["degraded"], true);
  const json closed = check("closed");
  EXPECT_EQ(closed["allowed"], false);
  EXPECT_EQ(closed["source"], "fail_closed");
  for (bool expected : {true, true, false}) {  // 4 per hour shared by 2 instances
    const json local = check("local");
    EXPECT_EQ(local["allowed"], expected) << local;
    EXPECT_EQ(local["source"], "local_fallback");
  }
  EXPECT_EQ(get("/healthz")->status, 200);
  // Five failures in a row opened the breaker: readiness says so without asking Redis.
  ready = get("/readyz");
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(Body(ready)["breaker"], "open") << ready->body;
  EXPECT_TRUE(service.process().WaitForLog("store failed")) << service.process().Log();
  const std::string metrics = get("/metrics")->body;
  for (std::string_view line : {
           "sluice_decisions_total{rule=\"slow\",source=\"store\"} 2\n",
           "sluice_decisions_total{rule=\"slow\",source=\"fail_open\"} 1\n",
           "sluice_decisions_total{rule=\"slow\",source=\"hot_key_cache\"} 1\n",
           "sluice_hot_key_cache_hits_total 1\n",
           "sluice_decisions_total{rule=\"closed\",source=\"fail_closed\"} 1\n",
           "sluice_decisions_total{rule=\"local\",source=\"local_fallback\"} 3\n",
           "sluice_store_errors_total 6\n",  // five degraded decisions, one readiness probe
           "sluice_breaker_opens_total 1\n",
       }) {
    EXPECT_NE(metrics.find(line), std::string::npos) << line << "\nin:\n" << metrics;
  }
  EXPECT_EQ(metrics.find("sluice_breaker_state{state=\"closed\"} 1\n"), std::string::npos);
  const std::string node = "{node=\"127.0.0.1:" + std::to_string(redis->port()) + "\"";
  EXPECT_NE(metrics.find("sluice_node_breaker_state" + node + ",state=\"open\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_node_breaker_opens_total" + node + "} 1\n"), std::string::npos);

  ASSERT_TRUE(redis->Restart());
  const auto restarted = std::chrono::steady_clock::now();
  const auto deadline = restarted + 10s;
  int fresh_key = 0;
  while (check("slow", "fresh" + std::to_string(fresh_key++))["source"] != "store" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  const auto recovery = std::chrono::steady_clock::now() - restarted;
  std::printf("decisions back on Redis %lld ms after its restart\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(recovery).count()));
  EXPECT_LT(recovery, 3s);  // the breaker's 200 ms plus a reconnection, on a noisy machine
  EXPECT_EQ(get("/readyz")->status, 200);
  EXPECT_TRUE(service.process().WaitForLog("store is answering again")) << service.process().Log();
}

TEST(ServeE2ETest, SighupReloadsAGoodFileAndKeepsTheOldRulesOnABadOne) {
  Service service(kRules);
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const auto status_of = [&](std::string_view rule) {
    auto r = client.Post("/v1/check", R"({"rule":")" + std::string(rule) + R"(","key":"k"})",
                         "application/json");
    return r ? r->status : -1;
  };
  ASSERT_EQ(status_of("api"), 200);

  service.WriteConfig(
      "rules:\n  - { name: fresh, algorithm: fixed_window, limit: 5, period: 1s }\n");
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 1 rule(s)")) << service.process().Log();
  EXPECT_EQ(status_of("fresh"), 200);
  EXPECT_EQ(status_of("api"), 400);

  service.WriteConfig("rules:\n  - { name: broken, algorithm: gcra, limit: 0, period: 1s }\n");
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reload rejected")) << service.process().Log();
  EXPECT_NE(service.process().Log().find(service.config_path() +
                                         ":3: rules[0].limit: limit must be positive, got 0"),
            std::string::npos)
      << service.process().Log();
  EXPECT_EQ(status_of("fresh"), 200);
  EXPECT_EQ(status_of("broken"), 400);
}

// server.shadow_mode, turned on by a SIGHUP: the rule still counts, but a proxy's auth request
// over the limit gets 204 with no Retry-After, a check says allowed with the would-be denial, and
// /metrics counts the would-be denials.
TEST(ServeE2ETest, SighupTurnsShadowModeOnAndNothingIsDeniedAnyMore) {
  constexpr std::string_view kRule =
      "rules:\n  - { name: slow, algorithm: gcra, limit: 1, period: 10s, key: {header: X-Key} }\n";
  Service service{std::string(kRule)};
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const httplib::Headers key = {{"X-Key", "a"}};
  ASSERT_EQ(client.Get("/v1/auth/slow", key)->status, 204);
  ASSERT_EQ(client.Get("/v1/auth/slow", key)->status, 429);

  service.WriteConfig("server: { shadow_mode: true }\n" + std::string(kRule));
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 1 rule(s)")) << service.process().Log();
  const auto auth = client.Get("/v1/auth/slow", key);
  ASSERT_TRUE(auth);
  EXPECT_EQ(auth->status, 204);
  EXPECT_FALSE(auth->has_header("Retry-After"));
  EXPECT_EQ(auth->get_header_value("RateLimit"), R"("slow";r=0;t=10)");

  const std::string check = R"({"rule":"slow","key":"b"})";
  ASSERT_EQ(Body(client.Post("/v1/check", check, "application/json"))["would_allow"], true);
  const json over = Body(client.Post("/v1/check", check, "application/json"));
  EXPECT_EQ(over["allowed"], true);
  EXPECT_EQ(over["shadow"], true);
  EXPECT_EQ(over["would_allow"], false);
  EXPECT_EQ(
      MetricValue(service.port(), R"(sluice_shadow_checks_total{rule="slow",result="denied"})"), 2);
  EXPECT_EQ(MetricValue(service.port(), R"(sluice_checks_total{rule="slow",result="denied"})"), 1);
}

TEST(ServeE2ETest, AcquireAnswersWhenEachBookedSlotComesAndSigtermCancelsWaiters) {
  Service service(R"(rules:
  - { name: shaped, algorithm: gcra, limit: 5, period: 1s, burst: 1 }
  - { name: slow, algorithm: gcra, limit: 1, period: 10s, burst: 1 }
)");
  ASSERT_TRUE(service.up()) << service.process().Log();
  constexpr int kCallers = 5;
  std::vector<json> answers(kCallers);
  std::vector<std::chrono::milliseconds> elapsed(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      httplib::Client client = service.Client();
      const auto start = std::chrono::steady_clock::now();
      auto r = client.Post("/v1/acquire", R"({"rule":"shaped","key":"partner","max_wait_ms":2000})",
                           "application/json");
      elapsed[i] = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      if (r && r->status == 200) answers[i] = Body(r);
    });
  }
  for (auto& t : callers) t.join();
  std::vector<int64_t> waits;
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_EQ(answers[i]["outcome"], "admitted") << answers[i];
    const int64_t waited = answers[i]["waited_ms"];
    // waited_ms is rounded up and counted on the server's system clock, elapsed rounded down on
    // this process's steady clock: 1 ms for the rounding, 1 for the two clocks' drift.
    EXPECT_GE(elapsed[i].count() + 2, waited) << "answered before its slot";
    waits.push_back(waited);
  }
  // 5 per second: the five slots are 200 ms apart, whoever arrived first. A caller that arrived
  // later than the first waits that much less; on a loaded 2-core machine, starting the threads
  // and their connections can spread the arrivals over tens of milliseconds.
  std::sort(waits.begin(), waits.end());
  for (int i = 0; i < kCallers; ++i) {
    EXPECT_GE(waits[i], 200 * i - 100) << i;
    EXPECT_LT(waits[i], 200 * i + 100) << i;
  }

  // A waiter in line when SIGTERM comes is answered at once, and the process exits 0.
  httplib::Client client = service.Client();
  auto first = client.Post("/v1/acquire", R"({"rule":"slow","key":"k","max_wait_ms":0})",
                           "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(Body(first)["outcome"], "admitted");
  json cancelled;
  std::thread waiter([&] {  // its slot is 10 s away
    httplib::Client client = service.Client();
    auto r = client.Post("/v1/acquire", R"({"rule":"slow","key":"k","max_wait_ms":60000})",
                         "application/json");
    if (r) cancelled = Body(r);
  });
  std::this_thread::sleep_for(200ms);
  const auto signalled = std::chrono::steady_clock::now();
  service.process().Signal(SIGTERM);
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, 5s);
  EXPECT_EQ(cancelled["outcome"], "cancelled") << cancelled;
  EXPECT_EQ(service.process().WaitExit(5s), 0) << service.process().Log();
}

TEST(ServeE2ETest, SigtermAndSigintStopGracefullyWithStatusZero) {
  for (int signal : {SIGTERM, SIGINT}) {
    Service service(kRules);
    ASSERT_TRUE(service.up()) << service.process().Log();
    // A kept-alive idle connection must not hold the process up.
    httplib::Client client = service.Client();
    ASSERT_EQ(client.Get("/healthz")->status, 200);
    service.process().Signal(signal);
    EXPECT_EQ(service.process().WaitExit(5s), 0) << service.process().Log();
    EXPECT_NE(service.process().Log().find("stopped"), std::string::npos);
  }
}

// Signals reach the process whichever of its threads the kernel picks: on Redis it runs the
// store's threads besides the I/O threads, and none may die of a signal or miss one.
TEST(ServeE2ETest, AStormOfSighupsReloadsAndTheStopAmongThemStillDrains) {
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(kRules, redis->url());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  constexpr int kSighups = 50;
  for (int i = 0; i < kSighups; ++i) service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 2 rule(s)")) << service.process().Log();
  auto r = client.Post("/v1/check", R"({"rule":"api","key":"k"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  for (int i = 0; i < kSighups; ++i) service.process().Signal(SIGHUP);
  service.process().Signal(SIGTERM);
  EXPECT_EQ(service.process().WaitExit(10s), 0) << service.process().Log();
  const std::string log = service.process().Log();
  EXPECT_NE(log.find("stopped"), std::string::npos) << log;
  size_t reloads = 0;
  for (size_t at = log.find("reloaded"); at != std::string::npos;
       at = log.find("reloaded", at + 1)) {
    ++reloads;
  }
  EXPECT_GE(reloads, 1u);
  EXPECT_LE(reloads, 2u * kSighups);  // each pending SIGHUP is one reload at most
}

TEST(ServeE2ETest, BadConfigExitsWithStatusTwoNamingFileLineAndField) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string config = dir.File("bad.yaml");
  WriteFile(config, "rules:\n  - name: api\n    algorithm: gcra2\n    limit: 1\n    period: 1s\n");
  Process process({"serve", "--config", config}, dir.File("log"));
  ASSERT_TRUE(process.started());
  EXPECT_EQ(process.WaitExit(5s), 2);
  EXPECT_NE(process.Log().find(config + ":3: rules[0].algorithm: unknown algorithm 'gcra2'"),
            std::string::npos)
      << process.Log();

  Process bad_flag({"serve", "--config", config, "--listen", "nowhere"}, dir.File("log2"));
  EXPECT_EQ(bad_flag.WaitExit(5s), 2);
}

TEST(ServeE2ETest, AddressInUseExitsWithStatusOne) {
  Service first(kRules);
  ASSERT_TRUE(first.up()) << first.process().Log();
  TempDir dir;
  Process second({"serve", "--config", first.config_path(), "--listen",
                  "127.0.0.1:" + std::to_string(first.port())},
                 dir.File("log"));
  EXPECT_EQ(second.WaitExit(5s), 1) << second.Log();
  EXPECT_NE(second.Log().find("cannot listen on 127.0.0.1:"), std::string::npos) << second.Log();
}

TEST(ServeE2ETest, SigtermAnswersWaitersOnALineAReloadReplaced) {
  Service service("rules:\n  - { name: slow, algorithm: gcra, limit: 1, period: 10s, burst: 1 }\n");
  ASSERT_TRUE(service.up()) << service.process().Log();
  const char* waiters = R"(sluice_acquire_waiters{rule="slow"})";
  const std::string acquire = R"({"rule":"slow","key":"k","max_wait_ms":60000})";
  httplib::Client client = service.Client();
  auto first = client.Post("/v1/acquire", R"({"rule":"slow","key":"k","max_wait_ms":0})",
                           "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(Body(first)["outcome"], "admitted");

  // Its slot is 10 s away; then the rule's limit changes, and a second waiter books on the new
  // line, 5 s after the first.
  std::vector<json> answers(2);
  std::vector<std::thread> callers;
  const auto wait_in_line = [&](size_t i) {
    callers.emplace_back([&, i] {
      httplib::Client own = service.Client();
      if (auto r = own.Post("/v1/acquire", acquire, "application/json")) answers[i] = Body(r);
    });
  };
  wait_in_line(0);
  ASSERT_TRUE(WaitForMetric(service.port(), waiters, 1));
  service.WriteConfig(
      "rules:\n  - { name: slow, algorithm: gcra, limit: 2, period: 10s, burst: 1 }\n");
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 1 rule(s)")) << service.process().Log();
  wait_in_line(1);
  ASSERT_TRUE(WaitForMetric(service.port(), waiters, 2));

  const auto signalled = std::chrono::steady_clock::now();
  service.process().Signal(SIGTERM);
  for (auto& t : callers) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, 4s);  // the drain would wait 10 s
  EXPECT_EQ(answers[0]["outcome"], "cancelled") << answers[0];
  EXPECT_EQ(answers[1]["outcome"], "cancelled") << answers[1];
  EXPECT_EQ(service.process().WaitExit(5s), 0) << service.process().Log();
  EXPECT_EQ(service.process().Log().find("drain timed out"), std::string::npos)
      << service.process().Log();
}

TEST(ServeE2ETest, AClientThatLeavesGivesUpItsPlaceInLine) {
  // One admission per 3 s, in arrival order; at most three acquires in progress for the key.
  Service service(R"(rules:
  - { name: line, algorithm: sliding_log, limit: 1, period: 3s, max_waiters_per_key: 3 }
)");
  ASSERT_TRUE(service.up()) << service.process().Log();
  const char* waiters = R"(sluice_acquire_waiters{rule="line"})";
  const auto acquire = [](int max_wait_ms) {
    return R"({"rule":"line","key":"k","max_wait_ms":)" + std::to_string(max_wait_ms) + "}";
  };
  httplib::Client client = service.Client();
  client.set_read_timeout(15s);
  auto first = client.Post("/v1/acquire", acquire(0), "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(Body(first)["outcome"], "admitted");

  // The first in line stays, and pipelines its next request while it waits.
  RawConnection live(service.port());
  ASSERT_TRUE(live.Send(RawPost("/v1/acquire", acquire(10000))));
  ASSERT_TRUE(WaitForMetric(service.port(), waiters, 1));
  ASSERT_TRUE(live.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  // Two more fill the line, then leave.
  std::vector<std::unique_ptr<RawConnection>> leaving;
  for (int i = 0; i < 2; ++i) {
    leaving.push_back(std::make_unique<RawConnection>(service.port()));
    ASSERT_TRUE(leaving.back()->Send(RawPost("/v1/acquire", acquire(60000))));
    ASSERT_TRUE(WaitForMetric(service.port(), waiters, 2 + i));
  }
  auto full = client.Post("/v1/acquire", acquire(60000), "application/json");
  ASSERT_TRUE(full);
  EXPECT_EQ(Body(full)["outcome"], "queue_full");
  for (auto& connection : leaving) connection->Close();
  ASSERT_TRUE(WaitForMetric(service.port(), waiters, 1));
  EXPECT_EQ(
      MetricValue(service.port(), R"(sluice_acquires_total{rule="line",outcome="cancelled"})"), 2);

  // A newcomer is behind the one who stayed only: admitted one period after it, within 8 s
  // (behind the two who left too, it would wait more than that, and be denied).
  auto next = client.Post("/v1/acquire", acquire(8000), "application/json");
  ASSERT_TRUE(next);
  EXPECT_EQ(Body(next)["outcome"], "admitted") << next->body;
  const std::string out = live.ReadToEnd();
  const size_t admitted = out.find(R"({"outcome":"admitted")");
  const size_t health = out.find(R"({"status":"ok"})");
  ASSERT_NE(admitted, std::string::npos) << out;
  ASSERT_NE(health, std::string::npos) << out;
  EXPECT_LT(admitted, health);
  EXPECT_EQ(MetricValue(service.port(), waiters), 0);
}

TEST(ServeE2ETest, WithoutAConfigItServesTheBuiltInExampleFromAnyDirectory) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const int port = sluice::testing::FreeLoopbackPort();
  Process process({"serve", "--listen", "127.0.0.1:" + std::to_string(port)}, dir.File("log"),
                  dir.path());
  ASSERT_TRUE(WaitUntilUp(port, process)) << process.Log();
  EXPECT_NE(process.Log().find("from examples/sluice.yaml (built in), store memory://"),
            std::string::npos)
      << process.Log();
  httplib::Client client = LocalClient(port);
  auto r = client.Post("/v1/check", R"({"rule":"login","key":"user:42"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["limit"], 5);
  EXPECT_TRUE(r->get_header_value("RateLimit-Policy").starts_with(R"("login";)"));

  process.Signal(SIGHUP);
  EXPECT_TRUE(process.WaitForLog("nothing to reload")) << process.Log();
  EXPECT_EQ(process.Stop(5s), 0) << process.Log();
}

TEST(ServeE2ETest, SighupWarnsOnceAboutTheFieldsThatNeedARestart) {
  Service service(kRules, "memory://", "timeout_ms: 50");
  ASSERT_TRUE(service.up()) << service.process().Log();
  // --listen and --io-threads override listen and server.io_threads: no warning for them.
  WriteFile(service.config_path(), std::string("listen: 127.0.0.1:1\n"
                                               "store: {url: memory://, timeout_ms: 70}\n"
                                               "server: {io_threads: 3, read_timeout: 5s,\n"
                                               "         idle_timeout: 60s, max_waiters: 10,\n"
                                               "         max_connections: 500}\n") +
                                       kRules);
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 2 rule(s)")) << service.process().Log();
  ASSERT_TRUE(service.process().WaitForLog("only applied on restart")) << service.process().Log();
  EXPECT_NE(service.process().Log().find(
                "changed in " + service.config_path() +
                " but only applied on restart, still running the old values: store.timeout_ms, "
                "server.read_timeout, server.max_connections\n"),
            std::string::npos)
      << service.process().Log();
}

TEST(ServeE2ETest, OnRedisChecksCarryRateLimitHeadersAndABatchTakesOneRoundTrip) {
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(kRules, redis->url());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();

  auto allowed = client.Post("/v1/check", R"({"rule":"slow","key":"k"})", "application/json");
  ASSERT_TRUE(allowed);
  EXPECT_EQ(Body(allowed)["source"], "store");
  EXPECT_EQ(allowed->get_header_value("RateLimit-Policy"), R"("slow";q=1;w=10)");
  EXPECT_EQ(allowed->get_header_value("RateLimit"), R"("slow";r=0;t=10)");
  EXPECT_FALSE(allowed->has_header("Retry-After"));
  auto denied = client.Post("/v1/check", R"({"rule":"slow","key":"k"})", "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(Body(denied)["allowed"], false);
  EXPECT_EQ(denied->get_header_value("RateLimit"), R"("slow";r=0;t=10)");
  EXPECT_EQ(denied->get_header_value("Retry-After"), "10");

  // Redis counts the reads it makes from its clients: a batch of 50 checks arrives in one write
  // (a read or two, where 50 separate checks would take 50). Each INFO costs two reads of its own.
  constexpr int kChecks = 50;
  json checks = json::array();
  for (int i = 0; i < kChecks; ++i) {
    checks.push_back({{"rule", "api"}, {"key", "batch:" + std::to_string(i)}});
  }
  const auto reads = [&] {
    const std::string info = redis->Cli({"INFO", "stats"});
    const size_t at = info.find("total_reads_processed:");
    return at == std::string::npos ? -1 : std::stoll(info.substr(at + 22));
  };
  const int64_t before = reads();
  auto batch = client.Post("/v1/check", json{{"checks", checks}}.dump(), "application/json");
  const int64_t after = reads();
  ASSERT_TRUE(batch);
  const json results = Body(batch)["results"];
  ASSERT_EQ(results.size(), static_cast<size_t>(kChecks)) << batch->body;
  for (const json& result : results) {
    EXPECT_EQ(result["allowed"], true) << result;
    EXPECT_EQ(result["source"], "store") << result;
  }
  EXPECT_EQ(redis->Cli({"EXISTS", "sluice:api:{batch:49}"}), "1");
  std::printf("Redis read the batch of %d checks in %lld read(s)\n", kChecks,
              static_cast<long long>(after - before - 2));
  EXPECT_GE(before, 0);
  EXPECT_LE(after - before - 2, 3);
}

TEST(ServeE2ETest, OnRedisSighupReloadsAndTheStateStaysInRedis) {
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(kRules, redis->url());
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  const auto check = [&](std::string_view rule) {
    auto r = client.Post("/v1/check", R"({"rule":")" + std::string(rule) + R"(","key":"k"})",
                         "application/json");
    return r ? Body(r) : json();
  };
  EXPECT_EQ(check("slow")["allowed"], true);

  // "slow" is unchanged and keeps its state; "api" doubles; "fresh" is new.
  service.WriteConfig(R"(rules:
  - { name: api, algorithm: gcra, limit: 200, period: 1m }
  - { name: slow, algorithm: gcra, limit: 1, period: 10s }
  - { name: fresh, algorithm: fixed_window, limit: 5, period: 1s, on_error: fail_closed }
)");
  service.process().Signal(SIGHUP);
  ASSERT_TRUE(service.process().WaitForLog("reloaded 3 rule(s)")) << service.process().Log();
  const json slow = check("slow");
  EXPECT_EQ(slow["allowed"], false) << slow;
  EXPECT_EQ(slow["source"], "store");
  EXPECT_EQ(check("api")["limit"], 200);
  const json fresh = check("fresh");
  EXPECT_EQ(fresh["allowed"], true);
  EXPECT_EQ(fresh["remaining"], 4);
  EXPECT_EQ(fresh["source"], "store");
}

TEST(ServeE2ETest, OnRedisACheckInFlightDuringTheDrainGetsItsPolicyAnswer) {
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Service service(R"(rules:
  - { name: closed, algorithm: gcra, limit: 10, period: 1s, on_error: fail_closed }
)",
                  redis->url(), "timeout_ms: 200");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  auto before = client.Post("/v1/check", R"({"rule":"closed","key":"k"})", "application/json");
  ASSERT_TRUE(before);
  EXPECT_EQ(Body(before)["source"], "store");

  redis->Pause();  // hung: the check waits its 200 ms for an answer that does not come
  json answer;
  int status = 0;
  std::thread caller([&] {
    httplib::Client own = service.Client();
    if (auto r = own.Post("/v1/check", R"({"rule":"closed","key":"k"})", "application/json")) {
      status = r->status;
      answer = Body(r);
    }
  });
  std::this_thread::sleep_for(100ms);  // the request is read and waits on Redis
  service.process().Signal(SIGTERM);
  caller.join();
  redis->Resume();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(answer["allowed"], false) << answer;
  EXPECT_EQ(answer["source"], "fail_closed") << answer;
  EXPECT_EQ(answer["degraded"], true) << answer;
  EXPECT_EQ(service.process().WaitExit(5s), 0) << service.process().Log();
}

}  // namespace
