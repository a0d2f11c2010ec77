#include "sluice/middleware/middleware.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "sluice/memory_store.h"
#include "sluice/middleware/beast.h"
#include "sluice/middleware/httplib.h"
#include "support/redis_server.h"

namespace sluice::middleware {
namespace {

using namespace std::chrono_literals;

class FakeRequest final : public RequestView {
 public:
  FakeRequest(std::string peer, std::string path, std::map<std::string, std::string> headers = {})
      : peer_(std::move(peer)), path_(std::move(path)), headers_(std::move(headers)) {}
  std::string_view peer_address() const override { return peer_; }
  std::string_view path() const override { return path_; }
  std::optional<std::string_view> header(std::string_view name) const override {
    auto it = headers_.find(std::string(name));
    if (it == headers_.end()) return std::nullopt;
    return std::string_view(it->second);
  }

 private:
  std::string peer_, path_;
  std::map<std::string, std::string> headers_;
};

TrustedProxies Trust(std::vector<std::string> cidrs) {
  auto trusted = TrustedProxies::Parse(cidrs);
  EXPECT_TRUE(trusted.ok()) << trusted.status().ToString();
  return *trusted;
}

TEST(ClientIp, ForwardedForOnlyFromTrustedProxies) {
  const auto untrusted = ClientIp();
  const FakeRequest forged("198.51.100.9", "/", {{"X-Forwarded-For", "1.2.3.4"}});
  EXPECT_EQ(untrusted(forged), "198.51.100.9");

  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8", "::1"}));
  EXPECT_EQ(behind_proxy(forged), "198.51.100.9");  // the peer is not a proxy of ours
  // The client may prepend anything; the right-most untrusted hop is who reached our proxy.
  const FakeRequest proxied("10.1.2.3", "/",
                            {{"X-Forwarded-For", "6.6.6.6, 203.0.113.7 , 10.9.9.9"}});
  EXPECT_EQ(behind_proxy(proxied), "203.0.113.7");
  const FakeRequest v6("::1", "/", {{"X-Forwarded-For", "2001:db8::1"}});
  EXPECT_EQ(behind_proxy(v6), "2001:db8::1");
  const FakeRequest no_header("10.0.0.1", "/");
  EXPECT_EQ(behind_proxy(no_header), "10.0.0.1");
}

TEST(TrustedProxies, RejectsGarbage) {
  auto bad = TrustedProxies::Parse({"10.0.0.0/8", "not-an-ip"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not-an-ip"), std::string::npos);
  EXPECT_FALSE(TrustedProxies::Parse({"10.0.0.0/33"}).ok());
}

TEST(Extractors, HeaderPathAndComposition) {
  const FakeRequest r("192.0.2.1", "/v1/items", {{"X-Api-Key", " abc "}});
  EXPECT_EQ(Header("X-Api-Key")(r), "abc");
  EXPECT_EQ(Header("X-User")(r), std::nullopt);
  EXPECT_EQ(Path()(r), "/v1/items");
  EXPECT_EQ(Compose({ClientIp(), Path(), Header("X-User")})(r), "192.0.2.1|/v1/items|-");
}

class RateLimiterTest : public ::testing::Test {
 protected:
  Limit FivePerTenSeconds() {
    auto limit = Limit::Create(Algorithm::kSlidingLog, 5, 10s);
    EXPECT_TRUE(limit.ok());
    return *limit;
  }
  ManualClock clock_;
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
};

TEST_F(RateLimiterTest, HeadersOnAllowAnd429OnDeny) {
  Limiter limiter(store_, "demo", FivePerTenSeconds());
  RateLimiter per_ip(limiter, ClientIp(), "demo");
  const FakeRequest r("192.0.2.1", "/test");
  Verdict v = per_ip.Check(r);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.status, 200);
  ASSERT_EQ(v.headers.size(), 2u);
  EXPECT_EQ(v.headers[0],
            std::make_pair(std::string("RateLimit-Policy"), std::string("\"demo\";q=5;w=10")));
  EXPECT_EQ(v.headers[1].first, "RateLimit");
  EXPECT_EQ(v.headers[1].second, "\"demo\";r=4;t=10");
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(per_ip.Check(r).allowed);
  clock_.Advance(3s);
  v = per_ip.Check(r);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.status, 429);
  EXPECT_EQ(v.body, R"({"error":"rate limit exceeded"})");
  ASSERT_EQ(v.headers.size(), 3u);
  EXPECT_EQ(v.headers[1].second, "\"demo\";r=0;t=7");
  EXPECT_EQ(v.headers[2], std::make_pair(std::string("Retry-After"), std::string("7")));
  // Another client is not affected.
  EXPECT_TRUE(per_ip.Check(FakeRequest("192.0.2.2", "/test")).allowed);
}

TEST_F(RateLimiterTest, BeastAdapter) {
  namespace http = boost::beast::http;
  Limiter limiter(store_, "beast", FivePerTenSeconds());
  RateLimiter per_key(limiter, Header("X-Api-Key"), "beast", /*cost=*/5);
  http::request<http::string_body> request(http::verb::get, "/x?y=1", 11);
  request.set("x-api-key", "k1");  // Beast's field lookup is case-insensitive too
  const boost::asio::ip::tcp::endpoint peer(boost::asio::ip::make_address("127.0.0.1"), 5000);
  EXPECT_EQ(BeastRequest(request, peer).path(), "/x");
  Verdict v = CheckBeast(per_key, request, peer);
  ASSERT_TRUE(v.allowed);
  http::response<http::string_body> ok(http::status::ok, 11);
  AddHeaders(v, ok);
  EXPECT_EQ(ok["RateLimit"], "\"beast\";r=0;t=10");
  v = CheckBeast(per_key, request, peer);
  ASSERT_FALSE(v.allowed);
  auto rejection = Rejection(v, request);
  EXPECT_EQ(rejection.result_int(), 429);
  EXPECT_EQ(rejection[http::field::content_type], "application/json");
  EXPECT_EQ(rejection["Retry-After"], "10");
  EXPECT_EQ(rejection.body(), R"({"error":"rate limit exceeded"})");
}

// The reference app's test: 20 parallel requests from one client to a route limited to 5 per
// 10 s give exactly five 200 and fifteen 429, over real HTTP.
TEST_F(RateLimiterTest, HttplibTwentyParallelRequestsAdmitExactlyFive) {
  MemoryStore store;  // real clock: a real server
  auto limit = Limit::Create(Algorithm::kSlidingLog, 5, 10s);
  Limiter limiter(store, "demo", *limit);
  RateLimiter per_ip(limiter, ClientIp(), "demo");
  httplib::Server server;
  server.Get("/test", Limited(per_ip, [](const httplib::Request&, httplib::Response& res) {
               res.set_content(R"({"message":"ok"})", "application/json");
             }));
  const int port = server.bind_to_any_port("127.0.0.1");  // bound: connections queue from now
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });

  std::atomic<int> ok{0}, limited{0}, other{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_connection_timeout(2s);
      client.set_read_timeout(2s);
      auto res = client.Get("/test");
      if (res && res->status == 200) {
        ++ok;
      } else if (res && res->status == 429 && res->has_header("Retry-After") &&
                 res->get_header_value("RateLimit").starts_with("\"demo\";r=0")) {
        ++limited;
      } else {
        ADD_FAILURE() << (res ? "status " + std::to_string(res->status)
                              : "error " + httplib::to_string(res.error()));
        ++other;
      }
    });
  }
  for (auto& c : clients) c.join();
  server.stop();
  serving.join();
  EXPECT_EQ(ok.load(), 5);
  EXPECT_EQ(limited.load(), 15);
  EXPECT_EQ(other.load(), 0);
}

}  // namespace
}  // namespace sluice::middleware
