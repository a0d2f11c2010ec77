#include "sluice/middleware/middleware.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "sluice/memory_store.h"
#include "sluice/middleware/beast.h"
#include "sluice/middleware/httplib.h"
#include "sluice/redis_store.h"
#include "sluice/resilient_store.h"
#include "support/failing_store.h"
#include "support/raw_connection.h"
#include "support/redis_server.h"

namespace sluice::middleware {
namespace {

using namespace std::chrono_literals;
using testing::FailingStore;

// A request whose headers are field lines in the order received: a name may repeat.
class FakeRequest final : public RequestView {
 public:
  FakeRequest(std::string peer, std::string path,
              std::vector<std::pair<std::string, std::string>> lines = {})
      : peer_(std::move(peer)), path_(std::move(path)), lines_(std::move(lines)) {}
  std::string_view peer_address() const override { return peer_; }
  std::string_view path() const override { return path_; }
  void ForEachHeaderValue(std::string_view name,
                          const std::function<void(std::string_view)>& visit) const override {
    for (const auto& [line_name, value] : lines_) {
      if (boost::beast::iequals(line_name, name)) visit(value);
    }
  }

 private:
  std::string peer_, path_;
  std::vector<std::pair<std::string, std::string>> lines_;
};

TrustedProxies Trust(std::vector<std::string> cidrs) {
  auto trusted = TrustedProxies::Parse(cidrs);
  EXPECT_TRUE(trusted.ok()) << trusted.status().ToString();
  return *trusted;
}

// A RateLimiter the test needs built: a configuration Create refuses fails the test.
RateLimiter Make(Limiter& limiter, KeyExtractor key, std::string policy_name,
                 RateLimiterOptions options = {}) {
  auto made = RateLimiter::Create(limiter, std::move(key), std::move(policy_name), options);
  if (!made.ok()) throw std::runtime_error("RateLimiter::Create: " + made.status().ToString());
  return std::move(made).value();
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
  EXPECT_EQ(behind_proxy(v6), "2001:db8::/64");
  const FakeRequest no_header("10.0.0.1", "/");
  EXPECT_EQ(behind_proxy(no_header), "10.0.0.1");
  // Every hop a trusted proxy: the left-most.
  const FakeRequest internal("10.0.0.1", "/", {{"X-Forwarded-For", "10.0.0.3, 10.0.0.2"}});
  EXPECT_EQ(behind_proxy(internal), "10.0.0.3");
}

// A client sends its own X-Forwarded-For line and the proxy adds a second line rather than
// appending: the lines are one list in order, so the forged line stays on the left.
TEST(ClientIp, ForwardedForLinesAreOneList) {
  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8"}));
  const FakeRequest two_lines("10.0.0.2", "/",
                              {{"X-Forwarded-For", "198.51.100.1, 198.51.100.2"},
                               {"Accept", "*/*"},
                               {"x-forwarded-for", "203.0.113.7, 10.0.0.1"}});
  EXPECT_EQ(behind_proxy(two_lines), "203.0.113.7");
  // The forged line alone, whatever it claims, ends at the address our proxy saw.
  const FakeRequest spoofed("10.0.0.2", "/",
                            {{"X-Forwarded-For", "10.0.0.9"}, {"X-Forwarded-For", "203.0.113.7"}});
  EXPECT_EQ(behind_proxy(spoofed), "203.0.113.7");
  // A client claiming to be a trusted proxy does not get past its own address.
  const FakeRequest claims_proxy(
      "10.0.0.2", "/",
      {{"X-Forwarded-For", "1.1.1.1, 10.0.0.9"}, {"X-Forwarded-For", "203.0.113.7"}});
  EXPECT_EQ(behind_proxy(claims_proxy), "203.0.113.7");
  // Empty lines and elements are ignored (RFC 9110 section 5.6.1).
  const FakeRequest empties("10.0.0.2", "/",
                            {{"X-Forwarded-For", ""},
                             {"X-Forwarded-For", " ,\t203.0.113.7\t, ,"},
                             {"X-Forwarded-For", ", 10.0.0.1 "}});
  EXPECT_EQ(behind_proxy(empties), "203.0.113.7");
}

// An entry that is not an address stops the walk: the key is the last address walked, the
// trusted hop that passed the garbage on, never anything the client wrote.
TEST(ClientIp, MalformedEntriesStopTheWalkAtTheLastTrustedHop) {
  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8"}));
  const auto key = [&](std::string forwarded) {
    return behind_proxy(FakeRequest("10.0.0.2", "/", {{"X-Forwarded-For", std::move(forwarded)}}));
  };
  EXPECT_EQ(key("203.0.113.7, unknown, 10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(key("203.0.113.7, 10.0.0.1, not an ip"), "10.0.0.2");  // the peer
  EXPECT_EQ(key("203.0.113.7, 300.1.2.3"), "10.0.0.2");
  EXPECT_EQ(key("203.0.113.7, 10.0.0.1:http"), "10.0.0.2");
  EXPECT_EQ(key("203.0.113.7, 10.0.0.1:123456"), "10.0.0.2");
  EXPECT_EQ(key("203.0.113.7, [2001:db8::1"), "10.0.0.2");
  EXPECT_EQ(key("203.0.113.7, \"10.0.0.1\""), "10.0.0.2");
  EXPECT_EQ(key("203.0.113.7, 10.0.0.1 10.0.0.3"), "10.0.0.2");
  // Garbage left of the client's address is never reached.
  EXPECT_EQ(key("<script>, 203.0.113.7, 10.0.0.1"), "203.0.113.7");
}

ClientPrefixes Prefixes(int ipv4, int ipv6) {
  auto prefixes = ClientPrefixes::Create(ipv4, ipv6);
  EXPECT_TRUE(prefixes.ok()) << prefixes.status().ToString();
  return prefixes.ok() ? *prefixes : ClientPrefixes();
}

TEST(ClientIp, PortsIpv6AndCanonicalForm) {
  const ClientPrefixes whole = Prefixes(32, 128);
  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8", "2001:db8:ffff::/48"}), whole);
  const auto key = [&](std::string peer, std::string forwarded) {
    return behind_proxy(
        FakeRequest(std::move(peer), "/", {{"X-Forwarded-For", std::move(forwarded)}}));
  };
  EXPECT_EQ(key("10.0.0.2", "203.0.113.7:4711, 10.0.0.1:443"), "203.0.113.7");
  EXPECT_EQ(key("10.0.0.2", "[2001:db8::7]:4711"), "2001:db8::7");
  EXPECT_EQ(key("10.0.0.2", "[2001:db8::7]"), "2001:db8::7");
  EXPECT_EQ(key("2001:db8:ffff::1", "2001:DB8:0:0::7, [2001:db8:ffff::2]:80"), "2001:db8::7");
  // Untrusted peers are keyed as written by the socket, in canonical form.
  EXPECT_EQ(ClientIp({}, whole)(FakeRequest("2001:DB8:0::1", "/")), "2001:db8::1");
  EXPECT_EQ(ClientIp()(FakeRequest("2001:DB8:0::1", "/")), "2001:db8::/64");
  // A peer that is not an address (an adapter with no IP to give) is its own key.
  EXPECT_EQ(ClientIp()(FakeRequest("unix:/run/app.sock", "/")), "unix:/run/app.sock");
}

// A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d: one client, one key, and the IPv4
// trusted ranges apply.
TEST(ClientIp, Ipv4MappedAddressesAreIpv4) {
  EXPECT_EQ(ClientIp()(FakeRequest("::ffff:192.0.2.1", "/")), "192.0.2.1");
  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8"}));
  EXPECT_EQ(behind_proxy(FakeRequest("::ffff:10.0.0.2", "/",
                                     {{"X-Forwarded-For", "::ffff:203.0.113.7, 10.0.0.1"}})),
            "203.0.113.7");
  EXPECT_EQ(behind_proxy(FakeRequest("10.0.0.2", "/",
                                     {{"X-Forwarded-For", "203.0.113.7, [::ffff:10.0.0.1]:80"}})),
            "203.0.113.7");
  // Mapped trusted blocks are the IPv4 blocks they map.
  const TrustedProxies mapped = Trust({"::ffff:10.0.0.0/104", "::ffff:192.0.2.9"});
  EXPECT_TRUE(mapped.Contains("10.1.2.3"));
  EXPECT_TRUE(mapped.Contains("::ffff:10.1.2.3"));
  EXPECT_TRUE(mapped.Contains("192.0.2.9"));
  EXPECT_FALSE(mapped.Contains("11.0.0.1"));
  EXPECT_FALSE(mapped.Contains("::a01:203"));  // 10.1.2.3's bits, not mapped: another address
  EXPECT_FALSE(TrustedProxies().Contains("10.0.0.1"));
}

// An IPv6 host is given a /64 and may send each request from another address in it: it is one
// client, keyed by its /64. IPv4 clients are keyed by their address; IPv4-mapped ones too (not
// as ::/64, which would put every IPv4 client of a dual-stack socket in one bucket).
TEST(ClientIp, Ipv6ClientsAreKeyedByTheirSlash64) {
  const auto key = ClientIp();
  EXPECT_EQ(key(FakeRequest("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "/")), "2001:db8:1:2::/64");
  EXPECT_EQ(key(FakeRequest("2001:db8:1:2::1", "/")), "2001:db8:1:2::/64");
  EXPECT_EQ(key(FakeRequest("2001:db8:1:3::1", "/")), "2001:db8:1:3::/64");
  EXPECT_EQ(key(FakeRequest("192.0.2.77", "/")), "192.0.2.77");
  EXPECT_EQ(key(FakeRequest("::ffff:192.0.2.77", "/")), "192.0.2.77");
  // The walk matches trusted proxies by their full addresses: a client in the proxy's own /64
  // is still the client, and is keyed by the /64.
  const auto behind_proxy = ClientIp(Trust({"2001:db8:1:2::1"}));
  EXPECT_EQ(behind_proxy(FakeRequest("2001:db8:1:2::1", "/",
                                     {{"X-Forwarded-For", "2001:db8:9::5, 2001:db8:1:2::7"}})),
            "2001:db8:1:2::/64");
  EXPECT_EQ(behind_proxy(FakeRequest("2001:db8:1:2::1", "/",
                                     {{"X-Forwarded-For", "[2001:db8:7:7:7::7]:4711"}})),
            "2001:db8:7:7::/64");
}

TEST(ClientIp, PrefixesAreConfigurablePerFamily) {
  const ClientPrefixes wide = Prefixes(24, 48);
  const auto key = ClientIp({}, wide);
  EXPECT_EQ(key(FakeRequest("192.0.2.77", "/")), "192.0.2.0/24");
  EXPECT_EQ(key(FakeRequest("::ffff:192.0.2.77", "/")), "192.0.2.0/24");
  EXPECT_EQ(key(FakeRequest("2001:db8:1:ff::1", "/")), "2001:db8:1::/48");
  // The function the trusted-proxy walk ends in, for callers with an address of their own.
  EXPECT_EQ(wide.KeyOf("[2001:db8:1:ff::1]:443"), "2001:db8:1::/48");
  EXPECT_EQ(wide.KeyOf("192.0.2.77:80"), "192.0.2.0/24");
  EXPECT_EQ(wide.KeyOf("unknown"), std::nullopt);
  EXPECT_EQ(ClientPrefixes().KeyOf("2001:DB8::1"), "2001:db8::/64");
  EXPECT_EQ(ClientPrefixes().KeyOf("192.0.2.77"), "192.0.2.77");
  EXPECT_EQ(Prefixes(32, 128).KeyOf("2001:db8::1"), "2001:db8::1");
  EXPECT_EQ(Prefixes(0, 0).KeyOf("2001:db8::1"), "::/0");
  for (const auto& [ipv4, ipv6] : {std::pair{33, 64}, {32, 129}, {-1, 64}, {32, -1}}) {
    EXPECT_EQ(ClientPrefixes::Create(ipv4, ipv6).status().code(), StatusCode::kInvalidArgument)
        << ipv4 << " " << ipv6;
  }
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

// Every spelling of a path is one key (request_path_test.cc has the spellings); a path that is no
// path has nothing to key on.
TEST(Extractors, PathIsNormalised) {
  for (const char* spelling : {"/login", "/%6cogin", "/l%6Fgin", "//login", "/./login",
                               "/a/../login", "/%2e/login", "/login/", "/login?x=1"}) {
    EXPECT_EQ(Path()(FakeRequest("192.0.2.1", spelling)), "/login") << spelling;
  }
  EXPECT_EQ(Path()(FakeRequest("192.0.2.1", "/a%2f")), "/a%2F");
  EXPECT_EQ(Path()(FakeRequest("192.0.2.1", "/log%zzin")), std::nullopt);
  EXPECT_EQ(Compose({ClientIp(), Path()})(FakeRequest("192.0.2.1", "/log%zzin")), "192.0.2.1|-");
}

// A zone id names an interface of the host that wrote it: the same client with or without one.
TEST(ClientIp, ZoneIdsAreDropped) {
  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8", "fe80::/10"}), Prefixes(32, 128));
  const auto key = [&](std::string peer, std::string forwarded) {
    return behind_proxy(
        FakeRequest(std::move(peer), "/", {{"X-Forwarded-For", std::move(forwarded)}}));
  };
  EXPECT_EQ(key("10.0.0.2", "2001:db8::1"), "2001:db8::1");
  EXPECT_EQ(key("10.0.0.2", "2001:db8::1%1"), "2001:db8::1");
  EXPECT_EQ(key("10.0.0.2", "2001:db8::1%eth0"), "2001:db8::1");
  EXPECT_EQ(key("10.0.0.2", "[2001:db8::1%2]:4711"), "2001:db8::1");
  // A link-local peer as a socket writes it, with its interface, is a trusted proxy.
  EXPECT_EQ(key("fe80::1%eth0", "2001:db8::1%1, fe80::2%eth0"), "2001:db8::1");
  EXPECT_EQ(ClientIp({}, Prefixes(32, 128))(FakeRequest("2001:db8::7%3", "/")), "2001:db8::7");
  EXPECT_EQ(ClientPrefixes().KeyOf("2001:db8::1%1"), "2001:db8::/64");
}

// An X-Forwarded-For with no entry (",", " , ") is as if there were none: the peer is the client.
// (Forward auth refuses such a request instead: auth_test.cc.)
TEST(ClientIp, AnEmptyListIsNoList) {
  const auto behind_proxy = ClientIp(Trust({"10.0.0.0/8"}));
  for (const char* empty : {",", " , ", ",,", ""}) {
    EXPECT_EQ(behind_proxy(FakeRequest("10.0.0.2", "/", {{"X-Forwarded-For", empty}})), "10.0.0.2")
        << "'" << empty << "'";
  }
  EXPECT_EQ(behind_proxy(FakeRequest("10.0.0.2", "/", {{"X-Forwarded-For", "203.0.113.7,"}})),
            "203.0.113.7");
}

// Parts that joined into one key before (an unescaped '|', a missing part written "-") are
// told apart.
TEST(Extractors, ComposedPartsCannotBeConfused) {
  const auto key = Compose({Header("X-A"), Header("X-B")});
  const auto of = [&](std::vector<std::pair<std::string, std::string>> lines) {
    return key(FakeRequest("192.0.2.1", "/", std::move(lines)));
  };
  EXPECT_EQ(of({{"X-A", "x|y"}, {"X-B", "z"}}), "x\\|y|z");
  EXPECT_EQ(of({{"X-A", "x"}, {"X-B", "y|z"}}), "x|y\\|z");
  EXPECT_EQ(of({{"X-B", "z"}}), "-|z");
  EXPECT_EQ(of({{"X-A", "-"}, {"X-B", "z"}}), "\\-|z");
  EXPECT_EQ(of({{"X-A", "x\\"}, {"X-B", "|y"}}), "x\\\\|\\|y");
  EXPECT_EQ(of({{"X-A", "x\\|"}, {"X-B", "y"}}), "x\\\\\\||y");
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
  const RateLimiter per_ip = Make(limiter, ClientIp(), "demo");
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
  const RateLimiter per_key = Make(limiter, Header("X-Api-Key"), "beast", {.cost = 5});
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

// Through the Beast adapter: every X-Forwarded-For line is read, and an IPv4 peer reported by a
// dual-stack socket as ::ffff:a.b.c.d is keyed, and trusted, as the IPv4 address.
TEST_F(RateLimiterTest, BeastAdapterReadsEveryForwardedForLineAndUnmapsPeers) {
  namespace http = boost::beast::http;
  const auto peer = [](const char* address) {
    return boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address(address), 5000);
  };
  http::request<http::string_body> proxied(http::verb::get, "/", 11);
  proxied.insert("X-Forwarded-For", "198.51.100.1");
  proxied.insert("X-Forwarded-For", "203.0.113.7, 10.0.0.1");
  EXPECT_EQ(ClientIp(Trust({"10.0.0.0/8"}))(BeastRequest(proxied, peer("::ffff:10.0.0.2"))),
            "203.0.113.7");

  Limiter limiter(store_, "beast", FivePerTenSeconds());
  const RateLimiter per_ip = Make(limiter, ClientIp(), "beast", {.cost = 5});
  const http::request<http::string_body> request(http::verb::get, "/", 11);
  EXPECT_TRUE(CheckBeast(per_ip, request, peer("::ffff:192.0.2.1")).allowed);
  EXPECT_FALSE(CheckBeast(per_ip, request, peer("192.0.2.1")).allowed);  // the same client
  EXPECT_TRUE(CheckBeast(per_ip, request, peer("::ffff:192.0.2.2")).allowed);
}

// The asynchronous path on a store that answers from its own I/O thread: the verdicts come back
// on the session's executor, none before it runs, and the request need not outlive the call.
TEST(BeastAsync, VerdictsArePostedToTheSessionExecutor) {
  namespace http = boost::beast::http;
  auto redis = testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  // The session's executor outlives the store: the store's I/O thread may still be inside its
  // post of the last verdict when the session has run it.
  boost::asio::io_context io;
  ManualClock clock;
  auto store = RedisStore::Create({.url = redis->url(),
                                   .timeout = 5s,
                                   .connect_timeout = 5s,
                                   .clock = &clock,
                                   .expiry_margin = 1h});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Limiter limiter(**store, "async", *Limit::Create(Algorithm::kSlidingLog, 2, 10s));
  const RateLimiter per_ip = Make(limiter, ClientIp(), "async");

  auto work = boost::asio::make_work_guard(io);
  constexpr int kRequests = 3;
  std::vector<Verdict> verdicts;
  std::vector<std::thread::id> threads;
  const boost::asio::ip::tcp::endpoint peer(boost::asio::ip::make_address("192.0.2.1"), 5000);
  for (int i = 0; i < kRequests; ++i) {
    const http::request<http::string_body> request(http::verb::get, "/", 11);
    // A move-only handler, as session handlers holding a unique resource are.
    CheckBeastAsync(per_ip, request, peer, io.get_executor(),
                    [&, token = std::make_unique<int>(i)](Verdict verdict) {
                      verdicts.push_back(std::move(verdict));
                      threads.push_back(std::this_thread::get_id());
                      if (verdicts.size() == kRequests) work.reset();
                    });
  }
  EXPECT_TRUE(verdicts.empty());  // posted, so not before the executor runs
  io.run_for(30s);
  ASSERT_EQ(verdicts.size(), static_cast<size_t>(kRequests));
  for (const auto& id : threads) EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_EQ(
      std::count_if(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.allowed; }),
      2);
  const auto denied =
      std::find_if(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return !v.allowed; });
  ASSERT_NE(denied, verdicts.end());
  http::request<http::string_body> request(http::verb::get, "/", 11);
  const auto rejection = Rejection(*denied, request);
  EXPECT_EQ(rejection.result_int(), 429);
  EXPECT_EQ(rejection["Retry-After"], "10");
  EXPECT_EQ(rejection["RateLimit-Policy"], "\"async\";q=2;w=10");
}

// The asynchronous path behind a ResilientStore on a real Redis, as an application would build
// it: checks made together share script calls (fewer calls than decisions, counted by Redis).
TEST(RateLimiterAsync, ConcurrentChecksShareScriptCallsBehindAResilientStore) {
  auto redis = testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  auto backend = RedisStore::Create({.url = redis->url(), .timeout = 5s, .connect_timeout = 5s});
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  ResilientStore store(**backend);
  Limiter limiter(store, "async", *Limit::Create(Algorithm::kGcra, 1'000'000, 1s));
  const RateLimiter per_ip = Make(limiter, ClientIp(), "async");
  redis->Cli({"CONFIG", "RESETSTAT"});

  constexpr int kRequests = 2000;
  std::atomic<int> allowed{0}, answered{0};
  for (int i = 0; i < kRequests; ++i) {
    const std::string peer = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250);
    per_ip.CheckAsync(FakeRequest(peer, "/"), [&](Verdict v) {
      if (v.allowed && !v.degraded) ++allowed;
      ++answered;
    });
  }
  for (int i = 0; i < 3000 && answered.load() < kRequests; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(answered.load(), kRequests);
  EXPECT_EQ(allowed.load(), kRequests);
  const std::string stats = redis->Cli({"INFO", "commandstats"});
  const std::string field = "cmdstat_evalsha:calls=";
  const size_t at = stats.find(field);
  ASSERT_NE(at, std::string::npos) << stats;
  const int64_t calls = std::stoll(stats.substr(at + field.size()));
  EXPECT_LT(calls * 2, kRequests) << calls << " script calls for " << kRequests << " decisions";
}

// The advertised quota is what `remaining` counts down from: on a bucket, its burst, over the
// time the burst takes to refill; so r never exceeds q, and t never exceeds w.
TEST_F(RateLimiterTest, BucketPolicyAdvertisesTheBurstThatRemainingCounts) {
  struct Case {
    Algorithm algorithm;
    int64_t count;
    Duration period;
    int64_t burst;
    const char* policy;
    const char* first;  // RateLimit after one request
  };
  const Case cases[] = {
      {Algorithm::kGcra, 100, 1min, 20, "\"p\";q=20;w=12", "\"p\";r=19;t=1"},
      {Algorithm::kTokenBucket, 10, 1s, 50, "\"p\";q=50;w=5", "\"p\";r=49;t=1"},
      {Algorithm::kLeakyBucket, 100, 1min, 20, "\"p\";q=20;w=12", "\"p\";r=19;t=1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(AlgorithmName(c.algorithm)));
    MemoryStore store{MemoryStoreOptions{.clock = &clock_}};
    Limiter limiter(store, "p", *Limit::Create(c.algorithm, c.count, c.period, c.burst));
    const RateLimiter per_ip = Make(limiter, ClientIp(), "p");
    const FakeRequest r("192.0.2.1", "/");
    Verdict v = per_ip.Check(r);
    ASSERT_EQ(v.headers.size(), 2u);
    EXPECT_EQ(v.headers[0].second, c.policy);
    EXPECT_EQ(v.headers[1].second, c.first);
    for (int64_t i = 1; i < c.burst; ++i) ASSERT_TRUE(per_ip.Check(r).allowed) << i;
    v = per_ip.Check(r);
    ASSERT_FALSE(v.allowed);
    // Spent: t is when the next unit is back (draft-10), one emission interval (under a second
    // here), well within the advertised window.
    EXPECT_EQ(v.headers[1].second, "\"p\";r=0;t=1");
  }
}

// Over real HTTP, two X-Forwarded-For lines from a client behind a loopback proxy.
TEST(HttplibForwardedFor, EveryLineIsRead) {
  MemoryStore store;  // real clock: a real server
  Limiter limiter(store, "xff", *Limit::Create(Algorithm::kSlidingLog, 1, 1h));
  const RateLimiter per_ip = Make(limiter, ClientIp(Trust({"127.0.0.0/8", "::1"})), "xff");
  httplib::Server server;
  LimitAllRoutes(server, per_ip);
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  const auto status = [port](std::vector<std::string> lines) {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(2s);
    client.set_read_timeout(2s);
    httplib::Headers headers;
    for (auto& line : lines) headers.emplace("X-Forwarded-For", std::move(line));
    auto res = client.Get("/", headers);
    return res ? res->status : -1;
  };
  EXPECT_EQ(status({"198.51.100.1", "203.0.113.7"}), 200);
  EXPECT_EQ(status({"198.51.100.2", "203.0.113.7"}), 429);  // the same client, whatever it forged
  EXPECT_EQ(status({"203.0.113.7, 127.0.0.1"}), 429);
  EXPECT_EQ(status({"203.0.113.7", "203.0.113.8"}), 200);  // another client
  server.stop();
  serving.join();
}

// Over real HTTP, the spellings of one path, sent as raw request lines: one limit for all. The
// adapter gives the path as the client sent it (cpp-httplib's Request::path is decoded once:
// "/%256cogin" would read "/%6cogin", then "/login").
TEST(HttplibPath, EverySpellingOfAPathSharesItsLimit) {
  MemoryStore store;  // real clock: a real server
  Limiter limiter(store, "path", *Limit::Create(Algorithm::kSlidingLog, 1, 1h));
  const RateLimiter per_path = Make(limiter, Path(), "path");
  httplib::Server server;
  LimitAllRoutes(server, per_path);
  server.Get(".*", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  const auto status = [port](std::string_view target) {
    const std::string answer = testing::RawExchange(
        port, "GET " + std::string(target) + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return answer.substr(0, answer.find("\r\n"));
  };
  EXPECT_EQ(status("/login"), "HTTP/1.1 200 OK");
  for (const char* spelling : {"/%6cogin", "/%6Cogin", "/l%6fgin", "//login", "/./login",
                               "/a/../login", "/%2e/login", "/login/", "/login?x=1"}) {
    EXPECT_EQ(status(spelling), "HTTP/1.1 429 Too Many Requests") << spelling;
  }
  EXPECT_EQ(status("/%256cogin"), "HTTP/1.1 200 OK");  // "%6cogin": another path
  EXPECT_EQ(status("/login%2F"), "HTTP/1.1 200 OK");
  server.stop();
  serving.join();
}

Limit TenPerSecondBurstOne() {
  auto limit = Limit::Create(Algorithm::kGcra, 10, 1s, 1);
  EXPECT_TRUE(limit.ok());
  return *limit;
}

// Shaping with delay = 3 on 10/s and a burst of 1: four requests at one instant are held 0, 100,
// 200 and 300 ms; the fifth gets 429; a slot freed 100 ms later takes one more.
TEST_F(RateLimiterTest, DelayHoldsUpToDelayRequestsThenRefuses) {
  Limiter limiter(store_, "shape", TenPerSecondBurstOne());
  auto shaper = RateLimiter::Create(limiter, ClientIp(), "shape", {.delay = 3});
  ASSERT_TRUE(shaper.ok()) << shaper.status().ToString();
  const FakeRequest r("192.0.2.1", "/");
  const char* timings[] = {"ratelimit;dur=0.000", "ratelimit;dur=100.000", "ratelimit;dur=200.000",
                           "ratelimit;dur=300.000"};
  for (int i = 0; i < 4; ++i) {
    const Verdict v = shaper->Check(r);
    ASSERT_TRUE(v.allowed) << i;
    EXPECT_EQ(v.status, 200);
    EXPECT_EQ(v.delay, i * 100ms);
    ASSERT_EQ(v.headers.size(), 3u);
    EXPECT_EQ(v.headers[2], std::make_pair(std::string("Server-Timing"), std::string(timings[i])));
  }
  const Verdict refused = shaper->Check(r);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.delay, 0us);
  ASSERT_EQ(refused.headers.size(), 3u);
  EXPECT_EQ(refused.headers[2], std::make_pair(std::string("Retry-After"), std::string("1")));
  clock_.Advance(100ms);
  const Verdict later = shaper->Check(r);
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.delay, 300ms);
  // Without delay the same limiter refuses all excess, and says nothing of timing.
  const RateLimiter policer = Make(limiter, ClientIp(), "shape");
  const Verdict policed = policer.Check(FakeRequest("192.0.2.9", "/"));
  EXPECT_TRUE(policed.allowed);
  EXPECT_EQ(policed.headers.size(), 2u);
  EXPECT_FALSE(policer.Check(FakeRequest("192.0.2.9", "/")).allowed);
}

// Shadow mode counts in the store as usual and admits every request: the RateLimit headers as
// decided, no 429 and no Retry-After, the would-be denial in the verdict and the observer.
TEST_F(RateLimiterTest, ShadowModeCountsAndAdmitsEveryRequest) {
  Limiter limiter(store_, "demo", FivePerTenSeconds());
  int decisions = 0;
  int would_deny = 0;
  const RateLimiter shadow =
      Make(limiter, ClientIp(), "demo",
           {.shadow_mode = true, .on_shadow_decision = [&](const Decision& d) {
              ++decisions;
              if (!d.allowed) ++would_deny;
            }});
  const FakeRequest r("192.0.2.1", "/test");
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(shadow.Check(r).would_deny);
  const Verdict over = shadow.Check(r);
  EXPECT_TRUE(over.allowed);
  EXPECT_TRUE(over.would_deny);
  EXPECT_EQ(over.status, 200);
  EXPECT_EQ(over.body, "");
  ASSERT_EQ(over.headers.size(), 2u);
  EXPECT_EQ(over.headers[1],
            std::make_pair(std::string("RateLimit"), std::string("\"demo\";r=0;t=10")));
  EXPECT_EQ(decisions, 6);
  EXPECT_EQ(would_deny, 1);
  // The checks counted in the store: the same key, enforced, is denied.
  EXPECT_FALSE(Make(limiter, ClientIp(), "demo").Check(r).allowed);

  Limiter meter(store_, "m", *Limit::Create(Algorithm::kGcra, 10, 1s, 1));
  EXPECT_EQ(RateLimiter::Create(meter, ClientIp(), "m", {.delay = 1, .shadow_mode = true})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RateLimiterTest, DelayNeedsAnAlgorithmThatBooksSlots) {
  Limiter windows(store_, "w", FivePerTenSeconds());
  EXPECT_EQ(RateLimiter::Create(windows, ClientIp(), "w", {.delay = 1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(RateLimiter::Create(windows, ClientIp(), "w", {.delay = 0}).ok());
  Limiter meter(store_, "m", TenPerSecondBurstOne());
  EXPECT_FALSE(RateLimiter::Create(meter, ClientIp(), "m", {.delay = -1}).ok());
  EXPECT_FALSE(RateLimiter::Create(meter, ClientIp(), "m", {.cost = -1}).ok());
  // Held for more than a year: refused.
  EXPECT_FALSE(RateLimiter::Create(meter, ClientIp(), "m", {.delay = Limit::kMaxCount}).ok());
}

// A cost above the burst, or a limiter name above the stores' bound, would fail every check: it
// is refused when the middleware is made (before, every request was admitted, with no headers).
TEST_F(RateLimiterTest, CreateRefusesWhatEveryCheckWouldBeRefusedFor) {
  Limiter burst_of_five(store_, "tb", *Limit::Create(Algorithm::kTokenBucket, 10, 1s, 5));
  const auto too_costly = RateLimiter::Create(burst_of_five, ClientIp(), "tb", {.cost = 10});
  EXPECT_EQ(too_costly.status().code(), StatusCode::kCostExceedsLimit);
  EXPECT_TRUE(RateLimiter::Create(burst_of_five, ClientIp(), "tb", {.cost = 5}).ok());
  EXPECT_EQ(
      RateLimiter::Create(burst_of_five, ClientIp(), "tb", {.cost = 6, .delay = 1}).status().code(),
      StatusCode::kCostExceedsLimit);

  Limiter long_name(store_, std::string(kMaxScopeBytes + 1, 'n'), FivePerTenSeconds());
  EXPECT_EQ(RateLimiter::Create(long_name, ClientIp(), "n").status().code(),
            StatusCode::kInvalidArgument);
  Limiter longest_name(store_, std::string(kMaxScopeBytes, 'n'), FivePerTenSeconds());
  EXPECT_TRUE(RateLimiter::Create(longest_name, ClientIp(), "n").ok());

  EXPECT_EQ(RateLimiter::Create(burst_of_five, KeyExtractor(), "tb").status().code(),
            StatusCode::kInvalidArgument);
}

// A key above the stores' bound is hashed, never truncated: with a 10 KB path, each client keeps
// its own limit (before, the address was cut off and every client shared one).
TEST_F(RateLimiterTest, LongKeysAreHashedNotTruncated) {
  Limiter limiter(store_, "long", FivePerTenSeconds());
  const RateLimiter per_path_and_ip = Make(limiter, Compose({Path(), ClientIp()}), "long");
  const std::string path = "/" + std::string(10 * 1024, 'a');
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(per_path_and_ip.Check(FakeRequest("192.0.2.1", path)).allowed) << i;
  }
  EXPECT_FALSE(per_path_and_ip.Check(FakeRequest("192.0.2.1", path)).allowed);
  EXPECT_TRUE(per_path_and_ip.Check(FakeRequest("192.0.2.2", path)).allowed);
  EXPECT_TRUE(per_path_and_ip.Check(FakeRequest("192.0.2.1", path + "b")).allowed);
}

// The hashed form is "sha256:" and the SHA-256 in hex (the digests here are from Python's
// hashlib); a short key that looks hashed is hashed too, so it cannot pose as a long key.
TEST_F(RateLimiterTest, HashedKeysAreSha256AndCannotBeForged) {
  Limiter limiter(store_, "hashed", FivePerTenSeconds());
  const RateLimiter per_key = Make(limiter, Header("X-Key"), "hashed");
  const auto remaining = [&](std::string_view key) { return limiter.Check(key, 0)->remaining; };
  const std::string long_key(600, 'a');
  const std::string digest =
      "sha256:ba35c170729417f1499e0886e7e12fcdb4ab00ad411110ae1e888c766d4ed70d";
  EXPECT_TRUE(per_key.Check(FakeRequest("192.0.2.1", "/", {{"X-Key", long_key}})).allowed);
  EXPECT_EQ(remaining(digest), 4);

  EXPECT_TRUE(per_key.Check(FakeRequest("192.0.2.1", "/", {{"X-Key", digest}})).allowed);
  EXPECT_EQ(remaining(digest), 4);  // not the long key's limit
  EXPECT_EQ(remaining("sha256:6711fb1f72ea3b38c4bf39897a20245ee0b25d4f18935967368c7495ac9ed5a2"),
            4);
  // A key of exactly the bound is kept as it is.
  const std::string longest(kMaxKeyBytes, 'b');
  EXPECT_TRUE(per_key.Check(FakeRequest("192.0.2.1", "/", {{"X-Key", longest}})).allowed);
  EXPECT_EQ(remaining(longest), 4);
}

// An IPv6 client sending each request from another address of its /64 is one client.
TEST_F(RateLimiterTest, Ipv6ClientRotatingThroughItsSlash64HasOneLimit) {
  Limiter limiter(store_, "v6", FivePerTenSeconds());
  const RateLimiter per_ip = Make(limiter, ClientIp(), "v6");
  int admitted = 0;
  for (int i = 1; i <= 20; ++i) {
    admitted += per_ip.Check(FakeRequest("2001:db8:1:2::" + std::to_string(i), "/")).allowed;
  }
  EXPECT_EQ(admitted, 5);
  EXPECT_TRUE(per_ip.Check(FakeRequest("2001:db8:1:3::1", "/")).allowed);  // another /64
}

// Clients rotating keys through a MemoryStore at its bound are admitted and limited, new keys
// evicting those not used lately, while a key in use keeps its exact limit; a store that cannot
// make room at all (RESOURCE_EXHAUSTED) is answered 503 with Retry-After, never admitted.
TEST_F(RateLimiterTest, RotatingKeysThroughAFullStoreKeepLimitsAndNoRoomIs503) {
  MemoryStore full(MemoryStoreOptions{.clock = &clock_, .max_keys = 8, .shards = 1});
  Limiter limiter(full, "full", FivePerTenSeconds(), FailurePolicy::kFailOpen);
  const RateLimiter per_ip = Make(limiter, ClientIp(), "full");
  int steady_allowed = 0;
  for (int i = 0; i < 200; ++i) {
    const Verdict v = per_ip.Check(FakeRequest("192.0.2." + std::to_string(2 + i % 250), "/"));
    EXPECT_TRUE(v.allowed) << i;
    if (i % 4 == 0) steady_allowed += per_ip.Check(FakeRequest("192.0.2.1", "/")).allowed;
  }
  EXPECT_EQ(steady_allowed, 5);
  EXPECT_LE(full.size(), 8u);

  FailingStore no_room;
  no_room.error = Status::ResourceExhausted("memory store is full");
  Limiter refused(no_room, "no_room", FivePerTenSeconds(), FailurePolicy::kFailOpen);
  const RateLimiter refusing = Make(refused, ClientIp(), "no_room");
  const Verdict v = refusing.Check(FakeRequest("192.0.2.1", "/"));
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.status, 503);
  EXPECT_EQ(v.headers, (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "1"}}));
  namespace http = boost::beast::http;
  const http::request<http::string_body> request(http::verb::get, "/", 11);
  const boost::asio::ip::tcp::endpoint peer(boost::asio::ip::make_address("192.0.2.99"), 5000);
  const auto rejection = Rejection(CheckBeast(refusing, request, peer), request);
  EXPECT_EQ(rejection.result_int(), 503);
  EXPECT_EQ(rejection["Retry-After"], "1");
}

// On a store with no failure policy in front of it, an outage is decided by the Limiter's own:
// fail_open admits, marked; fail_closed refuses, and local_fallback too (it needs a
// ResilientStore's local limiter). Any other error is refused: 503 for a full store, 500 for a
// fault. Before, each of these admitted the request.
TEST(RateLimiterErrors, OnlyAnOutageIsAdmittedAndOnlyByFailOpen) {
  struct Case {
    Status error;
    FailurePolicy policy;
    int status;  // 200: admitted
    const char* retry_after;
    bool degraded;
  };
  const Status down = Status::Unavailable("connection refused");
  const Status slow = Status::DeadlineExceeded("no answer within 50ms");
  const Status full = Status::ResourceExhausted("memory store is full");
  const Status fault = Status::Internal("ERR user_script:1: Script attempted to access nil");
  const Case cases[] = {
      {down, FailurePolicy::kFailOpen, 200, nullptr, true},
      {slow, FailurePolicy::kFailOpen, 200, nullptr, true},
      {down, FailurePolicy::kFailClosed, 503, "1", true},
      {slow, FailurePolicy::kLocalFallback, 503, "1", true},
      {full, FailurePolicy::kFailOpen, 503, "1", false},
      {full, FailurePolicy::kFailClosed, 503, "1", false},
      {fault, FailurePolicy::kFailOpen, 500, nullptr, false},
      {fault, FailurePolicy::kLocalFallback, 500, nullptr, false},
  };
  FailingStore store;
  const Limit limit = *Limit::Create(Algorithm::kGcra, 10, 1s);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error.ToString() + " under " + FailurePolicyName(c.policy));
    store.error = c.error;
    Limiter limiter(store, "errors", limit, c.policy);
    const RateLimiter per_ip = Make(limiter, ClientIp(), "errors");
    std::optional<Verdict> async;
    per_ip.CheckAsync(FakeRequest("192.0.2.1", "/"), [&](Verdict v) { async = std::move(v); });
    ASSERT_TRUE(async.has_value());
    for (const Verdict& v : {per_ip.Check(FakeRequest("192.0.2.1", "/")), *async}) {
      EXPECT_EQ(v.allowed, c.status == 200);
      EXPECT_EQ(v.status, c.status);
      EXPECT_EQ(v.error, c.error);
      EXPECT_EQ(v.degraded, c.degraded);
      if (c.retry_after == nullptr) {
        EXPECT_TRUE(v.headers.empty());
      } else {
        EXPECT_EQ(
            v.headers,
            (std::vector<std::pair<std::string, std::string>>{{"Retry-After", c.retry_after}}));
      }
      const char* body = c.status == 200   ? ""
                         : c.status == 500 ? R"({"error":"rate limiter failed"})"
                                           : R"({"error":"rate limiter unavailable"})";
      EXPECT_EQ(v.body, body);
    }
  }
}

// Behind a ResilientStore the failure policy decides an outage, with the RateLimit headers of
// its decision; a fault of the backend is still refused, even under fail_open.
TEST(RateLimiterErrors, BehindAResilientStoreThePolicyDecidesOutagesOnly) {
  ManualClock clock;
  FailingStore backend;
  ResilientStore store(backend, ResilientStoreOptions{.clock = &clock});
  Limiter limiter(store, "resilient", *Limit::Create(Algorithm::kGcra, 10, 1s),
                  FailurePolicy::kFailOpen);
  const RateLimiter per_ip = Make(limiter, ClientIp(), "resilient");
  const Verdict admitted = per_ip.Check(FakeRequest("192.0.2.1", "/"));
  EXPECT_TRUE(admitted.allowed);
  EXPECT_TRUE(admitted.degraded);
  EXPECT_TRUE(admitted.error.ok());
  EXPECT_EQ(admitted.headers.size(), 2u);

  backend.error = Status::Internal("ERR user_script:1: Script attempted to access nil");
  const Verdict refused = per_ip.Check(FakeRequest("192.0.2.1", "/"));
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.status, 500);
  EXPECT_EQ(refused.error, backend.error);
}

TEST(BeastShaping, AfterDelayWaitsOnATimerWithoutBlocking) {
  boost::asio::io_context io;
  Verdict held;
  held.delay = 30ms;
  bool held_ran = false, immediate_ran = false;
  const auto start = std::chrono::steady_clock::now();
  AfterDelay(held, io.get_executor(), [&] { held_ran = true; });
  EXPECT_FALSE(held_ran);
  AfterDelay(Verdict{}, io.get_executor(), [&] { immediate_ran = true; });
  EXPECT_TRUE(immediate_ran);
  io.run();  // returns once the timer has fired
  EXPECT_TRUE(held_ran);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
}

// Over real HTTP: six parallel requests on 5/s (200 ms apart) with delay 4: five are handled, each
// no earlier than its slot, and carry Server-Timing; the sixth gets 429. (The six must arrive
// within one slot of each other, or a later one finds a slot freed: 200 ms is wide enough on a
// loaded machine under TSan, where 50 ms was not.)
TEST(HttplibShaping, DelaysTheExcessToTheRate) {
  MemoryStore store;  // real clock: a real server
  Limiter limiter(store, "shape", *Limit::Create(Algorithm::kGcra, 5, 1s, 1));
  auto shaper = RateLimiter::Create(limiter, ClientIp(), "shape", {.delay = 4});
  ASSERT_TRUE(shaper.ok());
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> handled;
  httplib::Server server;
  server.Get("/", Limited(*shaper, [&](const httplib::Request&, httplib::Response& res) {
               {
                 std::lock_guard lock(mu);
                 handled.push_back(std::chrono::steady_clock::now());
               }
               res.set_content("ok", "text/plain");
             }));
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });

  std::atomic<int> ok{0}, limited{0}, other{0};
  std::vector<std::thread> clients;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_connection_timeout(2s);
      client.set_read_timeout(5s);
      auto res = client.Get("/");
      if (res && res->status == 200 &&
          res->get_header_value("Server-Timing").starts_with("ratelimit;dur=")) {
        ++ok;
      } else if (res && res->status == 429) {
        ++limited;
      } else {
        ++other;
      }
    });
  }
  for (auto& c : clients) c.join();
  server.stop();
  serving.join();
  EXPECT_EQ(ok.load(), 5);
  EXPECT_EQ(limited.load(), 1);
  EXPECT_EQ(other.load(), 0);
  ASSERT_EQ(handled.size(), 5u);
  std::sort(handled.begin(), handled.end());
  // Slot k is 200 ms × k after the first admission, which came after `start`. (Not after the
  // first request was handled: a stall of the machine may delay that past its check.)
  for (size_t k = 1; k < handled.size(); ++k) {
    EXPECT_GE(handled[k] - start, k * 200ms - 10ms) << "request " << k << " came early";
  }
  EXPECT_LT(handled.back() - handled.front(), 3s);
}

// The reference app's test: 20 parallel requests from one client to a route limited to 5 per
// 10 s give exactly five 200 and fifteen 429, over real HTTP.
TEST_F(RateLimiterTest, HttplibTwentyParallelRequestsAdmitExactlyFive) {
  MemoryStore store;  // real clock: a real server
  auto limit = Limit::Create(Algorithm::kSlidingLog, 5, 10s);
  Limiter limiter(store, "demo", *limit);
  const RateLimiter per_ip = Make(limiter, ClientIp(), "demo");
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
