// /v1/auth/{rule} through the Api, with the request's peer and headers as a proxy sends them:
// where the key comes from (a client address only from a trusted proxy, under the client
// prefixes; a header; the original method and path; a composition), what a request with nothing
// to key on gets (401, and no check), the answers of an allowed and a denied check (204, 429 or
// the rule's 403, with the RateLimit headers), and a store that fails.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "http/api.h"
#include "sluice/memory_store.h"
#include "sluice/resilient_store.h"
#include "support/failing_store.h"

namespace sluice::http {
namespace {

using std::chrono::seconds;

constexpr std::string_view kRules = R"(
forward_auth: {trusted_proxies: [10.0.0.0/8, "::1"]}
rules:
  - {name: per_client, algorithm: fixed_window, limit: 2, period: 1h, key: forwarded_for}
  - {name: real_ip, algorithm: fixed_window, limit: 1, period: 1h, key: real_ip}
  - {name: per_api_key, algorithm: fixed_window, limit: 1, period: 1h, key: {header: X-Api-Key}}
  - {name: per_route, algorithm: fixed_window, limit: 1, period: 1h,
     key: [{header: X-Tenant}, method, uri]}
  - {name: nginx, algorithm: fixed_window, limit: 1, period: 1h, key: forwarded_for,
     deny_status: 403}
  - {name: no_key, algorithm: fixed_window, limit: 1, period: 1h}
  - {name: shadow, algorithm: fixed_window, limit: 1, period: 1h, key: forwarded_for,
     shadow_mode: true}
)";

// A request as a proxy's auth subrequest shows it.
class ProxiedRequest final : public middleware::RequestView {
 public:
  ProxiedRequest(std::string peer, std::vector<std::pair<std::string, std::string>> headers)
      : peer_(std::move(peer)), headers_(std::move(headers)) {}

  std::string_view peer_address() const override { return peer_; }
  std::string_view path() const override { return "/v1/auth"; }
  void ForEachHeaderValue(std::string_view name,
                          const std::function<void(std::string_view)>& visit) const override {
    for (const auto& [n, value] : headers_) {
      if (std::equal(n.begin(), n.end(), name.begin(), name.end(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        visit(value);
      }
    }
  }

 private:
  std::string peer_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

struct Answer {
  int status = 0;
  std::string body;
  std::map<std::string, std::string, std::less<>> headers;

  std::string header(std::string_view name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "<absent>" : it->second;
  }
};

Answer Ask(Api& api, std::string_view rule, const middleware::RequestView* client,
           std::string_view method = "GET") {
  bool done = false;
  Exchange exchange([&done] { done = true; });
  const std::string target = "/v1/auth/" + std::string(rule);
  api.Handle({method, target, "", client}, exchange);
  EXPECT_TRUE(done);
  Answer answer{exchange.response.status, exchange.response.body, {}};
  for (size_t i = 0; i < exchange.response.header_count; ++i) {
    answer.headers.emplace(std::string(exchange.response.headers[i].name),
                           exchange.response.headers[i].value);
  }
  return answer;
}

std::vector<config::Rule> Rules(std::string_view yaml) {
  auto config = config::ParseConfig(yaml, "auth.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->rules;
}

class AuthTest : public ::testing::Test {
 protected:
  AuthTest() : api_(store_, metrics_, RuleTable::Build(Rules(kRules), store_, metrics_)) {}

  Answer Ask(std::string_view rule, std::string peer,
             std::vector<std::pair<std::string, std::string>> headers,
             std::string_view method = "GET") {
    const ProxiedRequest request(std::move(peer), std::move(headers));
    return http::Ask(api_, rule, &request, method);
  }

  // On an hour's boundary: a fixed window of 1h then ends 3600 s later.
  ManualClock clock_{Time(std::chrono::hours(472'222))};
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
  Metrics metrics_;
  Api api_;
};

TEST_F(AuthTest, AllowedIs204AndDeniedIs429WithTheRateLimitHeaders) {
  const Answer first = Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  EXPECT_EQ(first.status, 204);
  EXPECT_EQ(first.body, "");
  EXPECT_EQ(first.header("RateLimit-Policy"), R"("per_client";q=2;w=3600)");
  EXPECT_EQ(first.header("RateLimit"), R"("per_client";r=1;t=3600)");
  EXPECT_EQ(first.header("Retry-After"), "<absent>");
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}}).status, 204);

  const Answer denied = Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.body, R"({"error":"rate limit exceeded"})");
  EXPECT_EQ(denied.header("Retry-After"), "3600");
  EXPECT_EQ(denied.header("RateLimit"), R"("per_client";r=0;t=3600)");
  EXPECT_EQ(denied.header("RateLimit-Policy"), R"("per_client";q=2;w=3600)");
  EXPECT_EQ(metrics_.ForRule("per_client").allowed.load(), 2u);
  EXPECT_EQ(metrics_.ForRule("per_client").denied.load(), 1u);

  // Another client has a limit of its own.
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.8"}}).status, 204);
}

// A rule in shadow mode lets every request through: 204 with its RateLimit headers as decided,
// no Retry-After, its would-be denial counted.
TEST_F(AuthTest, AShadowRuleOverItsLimitStillAnswers204) {
  EXPECT_EQ(Ask("shadow", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}}).status, 204);
  const Answer over = Ask("shadow", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  EXPECT_EQ(over.status, 204);
  EXPECT_EQ(over.body, "");
  EXPECT_EQ(over.header("Retry-After"), "<absent>");
  EXPECT_EQ(over.header("RateLimit"), R"("shadow";r=0;t=3600)");
  EXPECT_EQ(metrics_.ForRule("shadow").allowed.load(), 2u);
  EXPECT_EQ(metrics_.ForRule("shadow").denied.load(), 0u);
  EXPECT_EQ(metrics_.ForRule("shadow").shadow_denied.load(), 1u);
}

TEST_F(AuthTest, DenyStatusCanBe403ForNginx) {
  EXPECT_EQ(Ask("nginx", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}}).status, 204);
  const Answer denied = Ask("nginx", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.header("Retry-After"), "3600");
  EXPECT_EQ(denied.header("RateLimit"), R"("nginx";r=0;t=3600)");
}

TEST_F(AuthTest, AnyMethodIsAsked) {
  for (std::string_view method : {"GET", "POST", "HEAD", "PUT", "DELETE"}) {
    EXPECT_EQ(Ask("per_api_key", "192.0.2.1", {{"X-Api-Key", std::string(method)}}, method).status,
              204)
        << method;
  }
}

// The client address is the middleware's ClientIp: X-Forwarded-For walked from the right past
// the trusted proxies, an IPv6 client keyed by its /64.
TEST_F(AuthTest, ForwardedForIsWalkedPastTrustedProxiesAndIpv6IsKeyedByItsSlash64) {
  // The client wrote the left entry; our proxies 10.1.1.1 and the peer appended theirs.
  const std::vector<std::pair<std::string, std::string>> forged = {
      {"X-Forwarded-For", "1.2.3.4, 198.51.100.7, 10.1.1.1"}};
  EXPECT_EQ(Ask("per_client", "10.0.0.1", forged).status, 204);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "5.6.7.8, 198.51.100.7"}}).status,
            429);

  EXPECT_EQ(Ask("per_client", "::1", {{"X-Forwarded-For", "2001:db8:1:2::1"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "::1", {{"X-Forwarded-For", "2001:db8:1:2:ffff::9"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "::1", {{"X-Forwarded-For", "[2001:db8:1:2::3]:4711"}}).status, 429);
  EXPECT_EQ(Ask("per_client", "::1", {{"X-Forwarded-For", "2001:db8:1:3::1"}}).status, 204);
}

TEST_F(AuthTest, RealIpIsTheClientAddressAsTheProxySetIt) {
  EXPECT_EQ(Ask("real_ip", "10.0.0.1", {{"X-Real-IP", "198.51.100.7"}}).status, 204);
  EXPECT_EQ(Ask("real_ip", "10.0.0.2", {{"X-Real-IP", "198.51.100.7"}}).status, 429);
  EXPECT_EQ(Ask("real_ip", "10.0.0.1", {{"X-Real-IP", "::ffff:198.51.100.8"}}).status, 204);
  EXPECT_EQ(Ask("real_ip", "10.0.0.1", {{"X-Real-IP", "198.51.100.8"}}).status, 429);

  const Answer garbage = Ask("real_ip", "10.0.0.1", {{"X-Real-IP", "unknown"}});
  EXPECT_EQ(garbage.status, 401);
  EXPECT_EQ(garbage.body,
            R"({"error":"no key for rule 'real_ip': the request has no X-Real-IP address"})");
}

// A client address from a peer that is not a trusted proxy could be anyone's: refused, never
// counted under the peer's address or a shared key.
TEST_F(AuthTest, AnAddressFromAnUntrustedPeerIsRefused) {
  for (std::string_view rule : {"per_client", "real_ip"}) {
    const Answer a = Ask(rule, "203.0.113.9",
                         {{"X-Forwarded-For", "198.51.100.7"}, {"X-Real-IP", "198.51.100.7"}});
    EXPECT_EQ(a.status, 401) << rule;
    EXPECT_EQ(a.body, R"({"error":"no key for rule ')" + std::string(rule) +
                          R"(': the request came from 203.0.113.9, which is not a trusted proxy )"
                          R"((forward_auth.trusted_proxies): its address headers cannot be )"
                          R"(believed"})");
    EXPECT_EQ(a.header("RateLimit"), "<absent>");
  }
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_EQ(metrics_.ForRule("per_client").allowed.load(), 0u);
}

TEST_F(AuthTest, AMissingKeyIsRefusedAndChecksNothing) {
  const Answer no_forwarded = Ask("per_client", "10.0.0.1", {});
  EXPECT_EQ(no_forwarded.status, 401);
  EXPECT_EQ(
      no_forwarded.body,
      R"({"error":"no key for rule 'per_client': the request has no X-Forwarded-For address"})");
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", " "}}).status, 401);

  const Answer no_header = Ask("per_api_key", "192.0.2.1", {{"X-Other", "k"}});
  EXPECT_EQ(no_header.status, 401);
  EXPECT_EQ(no_header.body,
            R"({"error":"no key for rule 'per_api_key': the request has no X-Api-Key header"})");
  EXPECT_EQ(Ask("per_api_key", "192.0.2.1", {{"X-Api-Key", "  "}}).status, 401);

  // One part of a composition missing is enough.
  const Answer no_method =
      Ask("per_route", "192.0.2.1", {{"X-Tenant", "t"}, {"X-Original-URI", "/a"}});
  EXPECT_EQ(no_method.status, 401);
  EXPECT_NE(no_method.body.find("X-Forwarded-Method or X-Original-Method"), std::string::npos);

  // An Api given no peer and no headers (a caller outside the HTTP server).
  EXPECT_EQ(http::Ask(api_, "per_api_key", nullptr).status, 401);
  EXPECT_EQ(store_.size(), 0u);
}

TEST_F(AuthTest, HeaderMethodAndPathComposeOneKey) {
  const auto ask = [&](std::vector<std::pair<std::string, std::string>> headers) {
    return Ask("per_route", "192.0.2.1", std::move(headers)).status;
  };
  EXPECT_EQ(ask({{"X-Tenant", "acme"}, {"X-Original-Method", "GET"}, {"X-Original-URI", "/a?x=1"}}),
            204);
  // The same path with another query string is the same key; Traefik's and Caddy's names too.
  EXPECT_EQ(ask({{"X-Tenant", "acme"}, {"X-Forwarded-Method", "GET"}, {"X-Forwarded-Uri", "/a"}}),
            429);
  EXPECT_EQ(ask({{"X-Tenant", "acme"}, {"X-Original-Method", "POST"}, {"X-Original-URI", "/a"}}),
            204);
  EXPECT_EQ(ask({{"X-Tenant", "acme"}, {"X-Original-Method", "GET"}, {"X-Original-URI", "/b"}}),
            204);
  EXPECT_EQ(ask({{"X-Tenant", "other"}, {"X-Original-Method", "GET"}, {"X-Original-URI", "/a"}}),
            204);
  // Parts are escaped as Compose escapes them: "a|GET" and "/x" is not "a" and "GET|/x".
  EXPECT_EQ(ask({{"X-Tenant", "a|GET"}, {"X-Original-Method", "PUT"}, {"X-Original-URI", "/x"}}),
            204);
  EXPECT_EQ(ask({{"X-Tenant", "a"}, {"X-Original-Method", "GET|PUT"}, {"X-Original-URI", "/x"}}),
            204);
}

// Every spelling of the original path that an application routes alike is one key
// (tests/middleware/request_path_test.cc has them all), from every proxy's header.
TEST_F(AuthTest, EverySpellingOfThePathIsOneKey) {
  const auto ask = [&](std::string header, std::string uri) {
    return Ask("per_route", "192.0.2.1",
               {{"X-Tenant", "acme"}, {"X-Original-Method", "POST"}, {header, uri}});
  };
  EXPECT_EQ(ask("X-Original-URI", "/login").status, 204);
  for (const char* spelling :
       {"/%6cogin", "/%6Cogin", "/l%6fgin", "//login", "/./login", "/a/../login", "/%2e/login",
        "/%2E%2E/login", "/login/", "/login/.", "/login?next=/x", "http://example.com/login",
        "////////////////////////////////////////login"}) {
    for (const char* header : {"X-Original-URI", "X-Forwarded-Uri"}) {
      EXPECT_EQ(ask(header, spelling).status, 429) << header << ": " << spelling;
    }
  }
  // An encoded '/' is not a separator, nor a letter's case another spelling.
  EXPECT_EQ(ask("X-Original-URI", "/login%2F").status, 204);
  EXPECT_EQ(ask("X-Original-URI", "/login%2f").status, 429);
  EXPECT_EQ(ask("X-Original-URI", "/Login").status, 204);
  EXPECT_EQ(metrics_.ForRule("per_route").allowed.load(), 3u);
}

// A path with a '%' that encodes nothing is not keyed (on the text as it is, each variant would
// be a fresh limit): 400, and nothing is checked.
TEST_F(AuthTest, AMalformedPathIs400AndChecksNothing) {
  for (const char* uri : {"/log%zzin", "/login%", "/login%2", "/%g0", "*", "login"}) {
    const Answer a =
        Ask("per_route", "192.0.2.1",
            {{"X-Tenant", "acme"}, {"X-Original-Method", "GET"}, {"X-Original-URI", uri}});
    EXPECT_EQ(a.status, 400) << uri;
    EXPECT_NE(a.body.find("no key for rule 'per_route': the request"), std::string::npos) << a.body;
    EXPECT_EQ(a.header("RateLimit"), "<absent>");
  }
  EXPECT_EQ(
      Ask("per_route", "192.0.2.1",
          {{"X-Tenant", "acme"}, {"X-Original-Method", "GET"}, {"X-Original-URI", "/log%zzin"}})
          .body,
      R"({"error":"no key for rule 'per_route': the request path has a '%' that is not )"
      R"(followed by two hex digits"})");
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_EQ(metrics_.ForRule("per_route").allowed.load(), 0u);
}

// An X-Forwarded-For with no entry in it is no X-Forwarded-For: 401, never the key of the proxy
// that sent it (shared by every client behind it). "1.2.3.4," has one.
TEST_F(AuthTest, AForwardedForWithNoEntryIsMissing) {
  for (const char* empty : {",", " , ", ",,,", " ,\t, "}) {
    const Answer a = Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", empty}});
    EXPECT_EQ(a.status, 401) << "'" << empty << "'";
    EXPECT_EQ(
        a.body,
        R"({"error":"no key for rule 'per_client': the request has no X-Forwarded-For address"})");
  }
  EXPECT_EQ(
      Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", ","}, {"X-Forwarded-For", " "}}).status,
      401);
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7,"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", ", 198.51.100.7"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}}).status, 429);
}

// A zone id names an interface of the host that wrote it, not another client: one key with or
// without it, from X-Forwarded-For and from X-Real-IP.
TEST_F(AuthTest, AZoneIdIsNotAnotherClient) {
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "2001:db8::1%1"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "2001:db8::1%eth0"}}).status, 204);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "[2001:db8::1%2]:80"}}).status, 429);
  EXPECT_EQ(Ask("per_client", "10.0.0.1", {{"X-Forwarded-For", "2001:db8::1"}}).status, 429);
  EXPECT_EQ(Ask("real_ip", "10.0.0.1", {{"X-Real-IP", "2001:db8::2%7"}}).status, 204);
  EXPECT_EQ(Ask("real_ip", "10.0.0.1", {{"X-Real-IP", "2001:db8::2"}}).status, 429);
}

TEST_F(AuthTest, ALongKeyIsHashedNotRefused) {
  const std::string token(4000, 't');
  EXPECT_EQ(Ask("per_api_key", "192.0.2.1", {{"X-Api-Key", token}}).status, 204);
  EXPECT_EQ(Ask("per_api_key", "192.0.2.1", {{"X-Api-Key", token}}).status, 429);
  EXPECT_EQ(Ask("per_api_key", "192.0.2.1", {{"X-Api-Key", token + "u"}}).status, 204);
}

TEST_F(AuthTest, AnUnknownRuleOrOneWithoutAKeyIs404) {
  const Answer unknown = Ask("nope", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body, R"({"error":"no rule named 'nope'"})");
  const Answer no_key = Ask("no_key", "10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  EXPECT_EQ(no_key.status, 404);
  EXPECT_EQ(
      no_key.body,
      R"x({"error":"rule 'no_key' has no key for /v1/auth: give it one (`key:` in the config)"})x");
  EXPECT_EQ(store_.size(), 0u);
}

// A store that fails is refused as /v1/check refuses it (never 204); behind a ResilientStore
// an outage is the rule's failure policy's.
TEST(AuthStoreFailure, AnErrorIsRefusedAndAnOutageIsForTheFailurePolicy) {
  constexpr std::string_view kPolicies = R"(
forward_auth: {trusted_proxies: [10.0.0.0/8]}
rules:
  - {name: open, algorithm: fixed_window, limit: 5, period: 1h, key: forwarded_for}
  - {name: closed, algorithm: fixed_window, limit: 5, period: 1h, key: forwarded_for,
     on_error: fail_closed, deny_status: 403}
)";
  const ProxiedRequest request("10.0.0.1", {{"X-Forwarded-For", "198.51.100.7"}});
  Metrics metrics;
  testing::FailingStore failing;
  Api plain(failing, metrics, RuleTable::Build(Rules(kPolicies), failing, metrics));
  for (std::string_view rule : {"open", "closed"}) {
    const Answer a = Ask(plain, rule, &request);
    EXPECT_EQ(a.status, 503) << rule;
    EXPECT_EQ(a.body, R"({"error":"connection refused"})");
  }

  ManualClock clock;
  ResilientStore resilient(failing, ResilientStoreOptions{.clock = &clock, .open_for = seconds(5)});
  Api api(resilient, metrics, RuleTable::Build(Rules(kPolicies), resilient, metrics), &resilient);
  const Answer open = Ask(api, "open", &request);
  EXPECT_EQ(open.status, 204);
  EXPECT_EQ(open.header("RateLimit-Policy"), R"("open";q=5;w=3600)");
  const Answer closed = Ask(api, "closed", &request);
  EXPECT_EQ(closed.status, 403);
  EXPECT_EQ(closed.header("Retry-After"), "5");
}

}  // namespace
}  // namespace sluice::http
