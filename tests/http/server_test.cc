// The HTTP server's bound on connections (server.max_connections), in process over real loopback
// sockets: at the bound with every connection in the middle of a request, a new one is answered
// 503 and closed, and counted; near the bound, the connection that has waited longest for a
// request is closed to make room, those that never sent one before those kept alive, and never
// one with a request in progress. Requests in progress are /v1/acquire calls waiting on
// ManualTimers that the test never advances, so that which connections are busy is known.
#include "http/server.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "http/api.h"
#include "sluice/memory_store.h"
#include "sluice/timers.h"
#include "support/raw_connection.h"

namespace sluice::http {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::RawPost;

constexpr size_t kMaxConnections = 50;
constexpr size_t kReclaimFrom = 45;  // 90% of the bound

constexpr std::string_view kRules = R"(
rules:
  - { name: api, algorithm: gcra, limit: 1000000, period: 1s }
  - { name: window, algorithm: fixed_window, limit: 1, period: 1s }
)";
// The window rule admits one request per second of the ManualClock, which never moves: once the
// first is admitted, every acquire waits, keeping its connection busy.
constexpr std::string_view kWindowCheck = R"({"rule":"window","key":"k"})";
constexpr std::string_view kWaitingAcquire = R"({"rule":"window","key":"k","max_wait_ms":5000})";
constexpr std::string_view kCheck = R"({"rule":"api","key":"k"})";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\n";

std::vector<config::Rule> ParseRules(std::string_view yaml) {
  auto config = config::ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->rules;
}

ServerOptions Options() {
  ServerOptions options;
  options.port = 0;
  options.io_threads = 2;
  options.max_connections = kMaxConnections;
  return options;
}

class ServerBoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Listen().ok());
    server_.Start();
    EXPECT_TRUE(Answer(kWindowCheck).find(R"("allowed":true)") != std::string::npos);
    ASSERT_TRUE(WaitForMetric("sluice_http_connections", 0));
  }

  // The value of `series` in /metrics, or -1.
  int64_t Metric(std::string_view series) const {
    const std::string text = metrics_.Exposition();
    const size_t at = text.find("\n" + std::string(series) + " ");
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + series.size() + 2));
  }

  // Polls /metrics until `series` has `value` (bounded by 10 s).
  bool WaitForMetric(std::string_view series, int64_t value) const {
    for (const auto deadline = std::chrono::steady_clock::now() + 10s; Metric(series) != value;) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }

  // A POST /v1/check on a connection of its own, closed once answered: the answer.
  std::string Answer(std::string_view check) const {
    RawConnection connection(server_.port());
    return connection.Send(RawPost("/v1/check", check)) ? connection.ReadResponse() : "";
  }

  // A new connection with an acquire waiting on it, once the server has it.
  std::unique_ptr<RawConnection> Waiting() {
    auto connection = std::make_unique<RawConnection>(server_.port());
    EXPECT_TRUE(connection->Send(RawPost("/v1/acquire", kWaitingAcquire)));
    EXPECT_TRUE(WaitForMetric("sluice_acquire_waiters{rule=\"window\"}", ++waiting_));
    return connection;
  }

  // A new connection that sends nothing, once the server counts it.
  std::unique_ptr<RawConnection> Silent() {
    const int64_t open = Metric("sluice_http_connections");
    auto connection = std::make_unique<RawConnection>(server_.port());
    EXPECT_TRUE(WaitForMetric("sluice_http_connections", open + 1));
    return connection;
  }

  int64_t waiting_ = 0;
  ManualClock clock_;
  ManualTimers timers_{clock_};
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
  Metrics metrics_;
  Api api_{store_, metrics_, RuleTable::Build(ParseRules(kRules), store_, metrics_), nullptr,
           &timers_};
  Server server_{Options(), api_};  // last: drained first
};

TEST_F(ServerBoundTest, AtTheBoundWithNoneIdleNewConnectionsAreAnswered503AndClosed) {
  std::vector<std::unique_ptr<RawConnection>> busy;
  for (size_t i = 0; i < kMaxConnections; ++i) busy.push_back(Waiting());
  EXPECT_EQ(Metric("sluice_http_connections"), 50);

  RawConnection silent(server_.port());
  const std::string refusal = silent.ReadToEnd();
  EXPECT_TRUE(refusal.starts_with("HTTP/1.1 503 Service Unavailable\r\n")) << refusal;
  EXPECT_NE(refusal.find("\r\nConnection: close\r\n"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("\r\nRetry-After: 1\r\n"), std::string::npos) << refusal;
  EXPECT_TRUE(refusal.ends_with(R"({"error":"too many connections: the server holds at most 50 )"
                                R"(at once; retry later"})"))
      << refusal;
  // A client that sends its request at once reads the same refusal, not a reset.
  const std::string refused_request = Answer(kCheck);
  EXPECT_TRUE(refused_request.starts_with("HTTP/1.1 503 ")) << refused_request;

  EXPECT_EQ(Metric("sluice_http_connections_refused_total"), 2);
  EXPECT_EQ(Metric("sluice_http_idle_connections_closed_total"), 0);
  EXPECT_EQ(Metric("sluice_http_connections"), 50);
  EXPECT_EQ(Metric("sluice_acquire_waiters{rule=\"window\"}"), 50);  // none was cut

  // A connection that ends makes room for the next.
  busy.front().reset();
  ASSERT_TRUE(WaitForMetric("sluice_http_connections", 49));
  EXPECT_TRUE(Answer(kCheck).starts_with(kOk));
}

TEST_F(ServerBoundTest, NearTheBoundTheConnectionWaitingLongestIsClosedNeverUsedOnesFirst) {
  RawConnection kept(server_.port());
  ASSERT_TRUE(kept.Send(RawPost("/v1/check", kCheck)));
  ASSERT_TRUE(kept.ReadResponse().starts_with(kOk));  // kept alive, idle
  std::vector<std::unique_ptr<RawConnection>> silent;
  while (silent.size() + 1 < kReclaimFrom) silent.push_back(Silent());
  EXPECT_EQ(Metric("sluice_http_idle_connections_closed_total"), 0);  // below 90%: none

  // At 90%, a newcomer closes the connection that has waited longest among those never used.
  RawConnection newcomer(server_.port());
  ASSERT_TRUE(newcomer.Send(RawPost("/v1/check", kCheck)));
  EXPECT_TRUE(newcomer.ReadResponse().starts_with(kOk));
  EXPECT_EQ(Metric("sluice_http_idle_connections_closed_total"), 1);
  EXPECT_EQ(Metric("sluice_http_connections"), 45);
  EXPECT_TRUE(silent[0]->ClosedByServer(5s));
  EXPECT_FALSE(silent[1]->ClosedByServer(0ms));
  EXPECT_FALSE(kept.ClosedByServer(0ms));

  // Connections with a request in progress are never closed: as busy ones arrive, the never-used
  // ones go, oldest first, then those kept alive after an answer, oldest first.
  std::vector<std::unique_ptr<RawConnection>> busy;
  for (size_t i = 1; i < silent.size(); ++i) {
    busy.push_back(Waiting());
    EXPECT_TRUE(silent[i]->ClosedByServer(5s)) << i;
  }
  EXPECT_FALSE(kept.ClosedByServer(0ms));
  busy.push_back(Waiting());
  EXPECT_TRUE(kept.ClosedByServer(5s));
  EXPECT_FALSE(newcomer.ClosedByServer(0ms));
  ASSERT_TRUE(newcomer.Send(RawPost("/v1/check", kCheck)));
  EXPECT_TRUE(newcomer.ReadResponse().starts_with(kOk));
  EXPECT_EQ(Metric("sluice_http_idle_connections_closed_total"), 45);
  EXPECT_EQ(Metric("sluice_http_connections_refused_total"), 0);
  EXPECT_EQ(Metric("sluice_acquire_waiters{rule=\"window\"}"), 44);
  EXPECT_EQ(Metric("sluice_http_connections"), 45);
}

}  // namespace
}  // namespace sluice::http
