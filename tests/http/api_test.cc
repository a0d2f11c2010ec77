#include "http/api.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "http/dashboard.h"
#include "sluice/memory_store.h"
#include "sluice/resilient_store.h"
#include "support/failing_store.h"

namespace sluice::http {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr std::string_view kRules = R"(
rules:
  - { name: api, algorithm: gcra, limit: 100, period: 1m }
  - { name: slow, algorithm: gcra, limit: 1, period: 10s }
  - { name: window, algorithm: fixed_window, limit: 3, period: 1s }
)";

std::vector<config::Rule> ParseRules(std::string_view yaml) {
  auto config = config::ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->rules;
}

using testing::FailingStore;

// A MemoryStore seen through the asynchronous API only, counting the calls it gets and, when
// `defer` is set, holding the answers back until Deliver(): a slow remote store. While `failure`
// is set it answers with it instead: UNAVAILABLE for a remote store that cannot be reached.
class RecordingStore final : public Store {
 public:
  explicit RecordingStore(const Clock& clock) : memory_(MemoryStoreOptions{.clock = &clock}) {}

  int batch_calls = 0;
  LeaseTerms last_lease;  // of the last request decided
  bool defer = false;
  Status failure;

  void Deliver() {
    while (!pending_.empty()) {
      auto next = std::move(pending_.front());
      pending_.pop_front();
      next();
    }
  }
  size_t pending() const { return pending_.size(); }
  size_t keys() const { return memory_.size(); }

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    ++batch_calls;
    if (!requests.empty()) last_lease = requests.back().lease;
    if (!failure.ok()) {
      return done(std::vector<Result<Decision>>(requests.size(), failure));
    }
    // Decided now, from requests that only live for this call; answered now or later.
    auto results = memory_.CheckBatch(requests);
    if (!defer) return done(std::move(results));
    pending_.push_back([done = std::move(done), results = std::move(results)]() mutable {
      done(std::move(results));
    });
  }
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override {
    done(memory_.Reset(scope, key));
  }
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override {
    if (!failure.ok()) return done(failure);
    memory_.CheckAllAsync(requests, std::move(done));
  }

 private:
  MemoryStore memory_;
  std::deque<std::function<void()>> pending_;
};

struct Answer {
  bool done = false;
  Response response;

  const std::string& header(std::string_view name) const {
    static const std::string kAbsent = "<absent>";
    const std::string* value = response.FindHeader(name);
    return value ? *value : kAbsent;
  }
};

// One request through `api`, which must answer before Handle returns.
Answer CallApi(Api& api, std::string_view method, std::string_view target, std::string_view body) {
  Answer answer;
  Exchange exchange([&answer] { answer.done = true; });
  api.Handle({method, target, body}, exchange);
  EXPECT_TRUE(answer.done) << method << " " << target << " " << body;
  answer.response = exchange.response;
  return answer;
}

class ApiTest : public ::testing::Test {
 protected:
  ApiTest()
      : store_(clock_),
        api_(store_, metrics_, RuleTable::Build(ParseRules(kRules), store_, metrics_)) {}

  Answer Call(std::string_view method, std::string_view target, std::string_view body = "") {
    return CallApi(api_, method, target, body);
  }
  Answer Check(std::string_view body) { return Call("POST", "/v1/check", body); }

  uint64_t Decisions(std::string_view rule) {
    RuleCounters& c = metrics_.ForRule(rule);
    return c.allowed.load() + c.denied.load();
  }

  ManualClock clock_;
  RecordingStore store_;
  Metrics metrics_;
  Api api_;
};

TEST_F(ApiTest, AllowedCheckAnswersWithDecisionAndRateLimitHeaders) {
  const Answer a = Check(R"({"rule":"api","key":"user:42","cost":1})");
  EXPECT_EQ(a.response.status, 200);
  EXPECT_EQ(a.response.content_type, "application/json");
  EXPECT_EQ(a.response.body, R"({"allowed":true,"limit":100,"remaining":99,"retry_after_ms":0,)"
                             R"("reset_after_ms":600,"source":"store","degraded":false})");
  EXPECT_EQ(a.header("RateLimit-Policy"), R"("api";q=100;w=60)");
  EXPECT_EQ(a.header("RateLimit"), R"("api";r=99;t=1)");
  EXPECT_EQ(a.header("Retry-After"), "<absent>");
  EXPECT_EQ(metrics_.ForRule("api").allowed.load(), 1u);
}

TEST_F(ApiTest, CostDefaultsToOneAndZeroPeeks) {
  EXPECT_EQ(Check(R"({"rule":"api","key":"k"})").header("RateLimit"), R"("api";r=99;t=1)");
  EXPECT_EQ(Check(R"({"rule":"api","key":"k","cost":0})").header("RateLimit"), R"("api";r=99;t=1)");
  // t: when one more unit is back (0.6 s on 100/min), not when all six are.
  EXPECT_EQ(Check(R"({"rule":"api","key":"k","cost":5})").header("RateLimit"), R"("api";r=94;t=1)");
}

TEST_F(ApiTest, DeniedCheckIsStill200WithRetryAfterAndConsumesNothing) {
  EXPECT_EQ(Check(R"({"rule":"slow","key":"k"})").response.status, 200);
  const Answer denied = Check(R"({"rule":"slow","key":"k"})");
  EXPECT_EQ(denied.response.status, 200);
  EXPECT_EQ(denied.response.body,
            R"({"allowed":false,"limit":1,"remaining":0,"retry_after_ms":10000,)"
            R"("reset_after_ms":10000,"source":"store","degraded":false})");
  EXPECT_EQ(denied.header("Retry-After"), "10");
  EXPECT_EQ(denied.header("RateLimit"), R"("slow";r=0;t=10)");
  EXPECT_EQ(metrics_.ForRule("slow").denied.load(), 1u);

  clock_.Advance(seconds(10));  // exactly retry_after: the denial took nothing
  EXPECT_EQ(Check(R"({"rule":"slow","key":"k"})").response.body.substr(0, 15),
            R"({"allowed":true)");
}

TEST_F(ApiTest, RetryAfterRoundsUpToWholeSeconds) {
  Check(R"({"rule":"slow","key":"k"})");
  clock_.Advance(std::chrono::milliseconds(8'500));
  const Answer denied = Check(R"({"rule":"slow","key":"k"})");
  EXPECT_EQ(denied.header("Retry-After"), "2");  // 1.5 s
  EXPECT_EQ(denied.header("RateLimit"), R"("slow";r=0;t=2)");
  EXPECT_NE(denied.response.body.find(R"("retry_after_ms":1500)"), std::string::npos);
}

TEST_F(ApiTest, CheckWithStoreErrorIs503AndCounted) {
  FailingStore unreachable;
  Api api(unreachable, metrics_, RuleTable::Build(ParseRules(kRules), unreachable, metrics_));
  bool done = false;
  Exchange exchange([&done] { done = true; });
  api.Handle({"POST", "/v1/check", R"({"rule":"api","key":"k"})"}, exchange);
  ASSERT_TRUE(done);
  EXPECT_EQ(exchange.response.status, 503);
  EXPECT_EQ(exchange.response.body, R"({"error":"connection refused"})");
  EXPECT_EQ(metrics_.store_errors(), 1u);
  EXPECT_EQ(Decisions("api"), 0u);

  api.Handle({"GET", "/readyz", ""}, exchange);
  EXPECT_EQ(exchange.response.status, 503);
  EXPECT_EQ(exchange.response.body, R"({"error":"store unavailable: connection refused"})");
  api.Handle({"GET", "/healthz", ""}, exchange);
  EXPECT_EQ(exchange.response.status, 200);
}

// A check or an acquire the store answers with an error is refused by the kind of error: 503
// with Retry-After for an outage (no failure policy in front of the store) or a full store, 500
// for a fault (a Lua script's error). Before, all were 503, with no Retry-After.
TEST_F(ApiTest, StoreErrorsAreRefusedByTheirKind) {
  struct Case {
    Status error;
    int status;
    std::string retry_after;
  };
  const Case cases[] = {
      {Status::Unavailable("connection refused"), 503, "1"},
      {Status::DeadlineExceeded("no answer within 50ms"), 503, "1"},
      {Status::ResourceExhausted("memory store is full (10000000 keys)"), 503, "1"},
      {Status::Internal("ERR user_script:1: attempt to compare nil with number"), 500, "<absent>"},
  };
  FailingStore failing;
  ManualTimers timers(clock_);
  Api api(failing, metrics_, RuleTable::Build(ParseRules(kRules), failing, metrics_), nullptr,
          &timers);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error.ToString());
    failing.error = c.error;
    for (const auto& [target, body] :
         {std::pair{"/v1/check", R"({"rule":"api","key":"k"})"},
          std::pair{"/v1/acquire", R"({"rule":"api","key":"k","max_wait_ms":1000})"}}) {
      const Answer a = CallApi(api, "POST", target, body);
      EXPECT_EQ(a.response.status, c.status) << target;
      EXPECT_EQ(a.header("Retry-After"), c.retry_after) << target;
      EXPECT_EQ(a.response.body, R"({"error":")" + c.error.message() + R"("})") << target;
    }
  }
  EXPECT_EQ(Decisions("api"), 0u);
  EXPECT_EQ(metrics_.store_errors(), 8u);
}

TEST_F(ApiTest, BatchAnswersInOrderWithPerItemErrorsInOneStoreCall) {
  const Answer a = Check(R"({"checks":[
      {"rule":"api","key":"a"},
      {"rule":"nope","key":"b"},
      {"rule":"slow","key":"c","cost":1},
      {"rule":"slow","key":"c"},
      {"rule":"api","key":""},
      {"rule":"api","key":"a","cost":-1},
      7]})");
  EXPECT_EQ(a.response.status, 200);
  EXPECT_EQ(a.response.body,
            R"({"results":[)"
            R"({"allowed":true,"limit":100,"remaining":99,"retry_after_ms":0,"reset_after_ms":600,)"
            R"("source":"store","degraded":false},)"
            R"({"error":"unknown rule 'nope'"},)"
            R"({"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":10000,)"
            R"("source":"store","degraded":false},)"
            R"({"allowed":false,"limit":1,"remaining":0,"retry_after_ms":10000,)"
            R"("reset_after_ms":10000,"source":"store","degraded":false},)"
            R"({"error":"key must not be empty"},)"
            R"({"error":"'cost' must be a non-negative integer"},)"
            R"({"error":"a check must be a JSON object"}]})");
  EXPECT_EQ(a.response.FindHeader("RateLimit"), nullptr);
  EXPECT_EQ(store_.batch_calls, 1);
  EXPECT_EQ(metrics_.ForRule("api").allowed.load(), 1u);
  EXPECT_EQ(metrics_.ForRule("slow").allowed.load(), 1u);
  EXPECT_EQ(metrics_.ForRule("slow").denied.load(), 1u);
}

TEST_F(ApiTest, BatchWithNothingValidOrNothingAtAllSkipsTheStore) {
  EXPECT_EQ(Check(R"({"checks":[]})").response.body, R"({"results":[]})");
  EXPECT_EQ(Check(R"({"checks":[{"rule":"nope","key":"a"}]})").response.body,
            R"({"results":[{"error":"unknown rule 'nope'"}]})");
  EXPECT_EQ(store_.batch_calls, 0);
}

TEST_F(ApiTest, BatchStoreErrorsArePerItem) {
  FailingStore unreachable;
  Api api(unreachable, metrics_, RuleTable::Build(ParseRules(kRules), unreachable, metrics_));
  bool done = false;
  Exchange exchange([&done] { done = true; });
  api.Handle(
      {"POST", "/v1/check", R"({"checks":[{"rule":"api","key":"a"},{"rule":"x","key":"b"}]})"},
      exchange);
  ASSERT_TRUE(done);
  EXPECT_EQ(exchange.response.status, 200);
  EXPECT_EQ(exchange.response.body,
            R"({"results":[{"error":"connection refused"},{"error":"unknown rule 'x'"}]})");
  EXPECT_EQ(metrics_.store_errors(), 1u);
}

TEST_F(ApiTest, MalformedBatchesAre400) {
  EXPECT_EQ(Check(R"({"checks":{}})").response.body, R"({"error":"'checks' must be an array"})");
  EXPECT_EQ(Check(R"({"checks":[],"rule":"api"})").response.status, 400);
  std::string big = R"({"checks":[)";
  for (size_t i = 0; i <= kMaxBatchChecks; ++i) big += (i ? "," : "") + std::string("{}");
  big += "]}";
  const Answer a = Check(big);
  EXPECT_EQ(a.response.status, 400);
  EXPECT_EQ(a.response.body, R"({"error":"a batch holds at most 1000 checks, got 1001"})");
  EXPECT_EQ(store_.batch_calls, 0);
}

struct BadCheck {
  std::string body;
  std::string error;  // a substring of the error message
};

TEST_F(ApiTest, BadChecksAre400AndChangeNothing) {
  const std::vector<BadCheck> cases = {
      {"", "malformed JSON"},
      {R"({"rule":"api","key":"k")", "malformed JSON"},
      {"\"\xff\"", "malformed JSON"},
      {"[]", "the body must be a JSON object"},
      {R"({"rule":"api","key":"k","cost":1e999})", "malformed JSON"},
      {"7e77777777777777777", "malformed JSON"},
      {R"({"key":"k"})", "missing field 'rule'"},
      {R"({"rule":1,"key":"k"})", "'rule' must be a string"},
      {R"({"rule":"api"})", "missing field 'key'"},
      {R"({"rule":"api","key":42})", "'key' must be a string"},
      {R"({"rule":"nope","key":"k"})", "unknown rule 'nope'"},
      {R"({"rule":"api","key":""})", "key must not be empty"},
      {R"({"rule":"api","key":")" + std::string(513, 'k') + R"("})",
       "key is 513 bytes, above the maximum 512"},
      {R"({"rule":"api","key":"k","cost":-1})", "'cost' must be a non-negative integer"},
      {R"({"rule":"api","key":"k","cost":1.5})", "'cost' must be a non-negative integer"},
      {R"({"rule":"api","key":"k","cost":"1"})", "'cost' must be a non-negative integer"},
      {R"({"rule":"api","key":"k","cost":true})", "'cost' must be a non-negative integer"},
      {R"({"rule":"api","key":"k","cost":null})", "'cost' must be a non-negative integer"},
      {R"({"rule":"api","key":"k","cost":9223372036854775808})",
       "'cost' must be a non-negative integer"},
      {R"({"rule":"api","key":"k","cost":101})",
       "cost 101 exceeds the capacity 100 of this limit; it can never be admitted"},
      {R"({"rule":"api","key":"k","weight":1})", "unknown field 'weight'"},
  };
  for (const BadCheck& c : cases) {
    const Answer a = Check(c.body);
    EXPECT_EQ(a.response.status, 400) << c.body;
    EXPECT_EQ(a.response.content_type, "application/json");
    EXPECT_TRUE(a.response.body.starts_with(R"({"error":")")) << a.response.body;
    EXPECT_NE(a.response.body.find(c.error), std::string::npos)
        << c.body << " -> " << a.response.body;
  }
  EXPECT_EQ(store_.batch_calls, 0);
  EXPECT_EQ(store_.keys(), 0u);
  EXPECT_EQ(Decisions("api"), 0u);
  EXPECT_EQ(metrics_.http_responses_for_testing(400), cases.size());
  // The key a bad check named still has its whole quota.
  EXPECT_EQ(Check(R"({"rule":"api","key":"k","cost":0})").header("RateLimit"),
            R"("api";r=100;t=0)");
}

TEST_F(ApiTest, ABodyWithAKeyTwiceIs400NamingItAndChangesNothing) {
  // Read last-wins, the first would be a check of cost 1 and the second a peek: whatever sits in
  // front of sluice and reads the first occurrence would disagree about what was asked.
  const std::vector<std::string> cases = {
      R"({"rule":"api","key":"k","cost":1,"cost":0})",
      R"({"rule":"api","key":"other","key":"k"})",
      R"({"checks":[{"rule":"api","key":"k"},{"rule":"api","key":"k","cost":2,"cost":0}]})",
  };
  for (const std::string& body : cases) {
    const Answer a = Check(body);
    EXPECT_EQ(a.response.status, 400) << body;
    EXPECT_TRUE(a.response.body.starts_with(R"({"error":"duplicate key ')")) << a.response.body;
  }
  EXPECT_EQ(Check(R"({"rule":"api","key":"k","cost":1,"cost":0})").response.body,
            R"({"error":"duplicate key 'cost': each key may appear once in an object"})");
  EXPECT_EQ(store_.batch_calls, 0);
  EXPECT_EQ(store_.keys(), 0u);
  EXPECT_EQ(Decisions("api"), 0u);
}

TEST_F(ApiTest, ErrorMessagesAreValidJsonWhateverTheInput) {
  const Answer a = Check(R"({"rule":"a\"b\\c\u0001\u00e9","key":"k"})");
  EXPECT_EQ(a.response.status, 400);
  EXPECT_EQ(a.response.body, R"({"error":"unknown rule 'a\"b\\c\u0001é'"})");
}

TEST_F(ApiTest, BodyOverTheCapIs413) {
  const std::string body = R"({"rule":"api","key":")" + std::string(kMaxBodyBytes, 'k') + "\"}";
  const Answer a = Check(body);
  EXPECT_EQ(a.response.status, 413);
  EXPECT_EQ(a.response.body, R"({"error":"request body is above the maximum of 65536 bytes"})");
  EXPECT_EQ(store_.keys(), 0u);
}

TEST_F(ApiTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  const Answer missing = Call("GET", "/v2/check");
  EXPECT_EQ(missing.response.status, 404);
  EXPECT_NE(missing.response.body.find("no such path"), std::string::npos);

  const Answer get_check = Call("GET", "/v1/check");
  EXPECT_EQ(get_check.response.status, 405);
  EXPECT_EQ(get_check.header("Allow"), "POST");
  EXPECT_EQ(get_check.response.body, R"({"error":"/v1/check allows POST only"})");
  for (std::string_view path : {"/healthz", "/readyz", "/metrics"}) {
    const Answer a = Call("POST", path, "{}");
    EXPECT_EQ(a.response.status, 405) << path;
    EXPECT_EQ(a.header("Allow"), "GET") << path;
  }
  EXPECT_EQ(metrics_.http_responses_for_testing(404), 1u);
  EXPECT_EQ(metrics_.http_responses_for_testing(405), 4u);
}

TEST_F(ApiTest, HealthAndReadinessProbesLeaveNoState) {
  const Answer health = Call("GET", "/healthz?verbose=1");
  EXPECT_EQ(health.response.status, 200);
  EXPECT_EQ(health.response.body, R"({"status":"ok"})");
  const Answer ready = Call("GET", "/readyz");
  EXPECT_EQ(ready.response.status, 200);
  EXPECT_EQ(ready.response.body, R"({"status":"ready"})");
  EXPECT_EQ(store_.keys(), 0u);
}

TEST_F(ApiTest, MetricsExposeChecksAndResponses) {
  Check(R"({"rule":"slow","key":"k"})");
  Check(R"({"rule":"slow","key":"k"})");
  Call("GET", "/nowhere");
  const Answer a = Call("GET", "/metrics");
  EXPECT_EQ(a.response.status, 200);
  EXPECT_EQ(a.response.content_type, "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = a.response.body;
  for (std::string_view line : {
           "sluice_checks_total{rule=\"slow\",result=\"allowed\"} 1\n",
           "sluice_checks_total{rule=\"slow\",result=\"denied\"} 1\n",
           "sluice_checks_total{rule=\"api\",result=\"allowed\"} 0\n",
           "sluice_store_errors_total 0\n",
           "sluice_check_duration_seconds_count 2\n",
           "sluice_http_requests_total{code=\"200\"} 2\n",
           "sluice_http_requests_total{code=\"404\"} 1\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
}

TEST_F(ApiTest, ReloadSwapsRulesWhileRequestsInFlightKeepTheirOwn) {
  store_.defer = true;
  bool done = false;
  Exchange in_flight([&done] { done = true; });
  api_.Handle({"POST", "/v1/check", R"({"rule":"slow","key":"k"})"}, in_flight);
  EXPECT_FALSE(done);
  EXPECT_EQ(store_.pending(), 1u);

  api_.SetRules(RuleTable::Build(
      ParseRules("rules: [{name: fresh, algorithm: fixed_window, limit: 2, period: 1s}]"), store_,
      metrics_));
  store_.Deliver();  // the old rule table is gone from the Api, not from this request
  ASSERT_TRUE(done);
  EXPECT_EQ(in_flight.response.status, 200);
  EXPECT_EQ(*in_flight.response.FindHeader("RateLimit-Policy"), R"("slow";q=1;w=10)");

  store_.defer = false;
  EXPECT_EQ(Check(R"({"rule":"slow","key":"k"})").response.status, 400);
  EXPECT_EQ(Check(R"({"rule":"fresh","key":"k"})").header("RateLimit-Policy"),
            R"("fresh";q=2;w=1)");
  // Counters outlive the rule table that created them.
  EXPECT_EQ(metrics_.ForRule("slow").allowed.load(), 1u);
}

TEST_F(ApiTest, RefuseCountsTheResponse) {
  Response response;
  api_.Refuse(431, "request header is above the maximum of 8192 bytes", response);
  EXPECT_EQ(response.status, 431);
  EXPECT_EQ(response.body, R"({"error":"request header is above the maximum of 8192 bytes"})");
  EXPECT_EQ(metrics_.http_responses_for_testing(431), 1u);
}

TEST_F(ApiTest, ExchangeIsReusedAcrossRequests) {
  int calls = 0;
  Exchange exchange([&calls] { ++calls; });
  api_.Handle({"GET", "/v1/check", ""}, exchange);
  ASSERT_EQ(exchange.response.header_count, 1u);
  api_.Handle({"POST", "/v1/check", R"({"rule":"slow","key":"k"})"}, exchange);
  api_.Handle({"POST", "/v1/check", R"({"rule":"slow","key":"k"})"}, exchange);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(exchange.response.header_count, 3u);  // no Allow left over; Retry-After this time
  EXPECT_EQ(*exchange.response.FindHeader("Retry-After"), "10");
}

TEST_F(ApiTest, TopKeysAreHiddenUnlessExposed) {
  Check(R"({"rule":"slow","key":"k"})");
  Check(R"({"rule":"slow","key":"k"})");
  for (std::string_view target : {"/v1/top", "/v1/top?rule=slow"}) {
    const Answer hidden = Call("GET", target);
    EXPECT_EQ(hidden.response.status, 403) << target;
    EXPECT_EQ(hidden.response.body,
              R"({"error":"keys are hidden: set server.expose_keys: true to show them"})");
  }
}

TEST_F(ApiTest, TopKeysCountTheDenialsOfChecksAndBatchItems) {
  api_.SetExposeKeys(true);
  for (int i = 0; i < 3; ++i) Check(R"({"rule":"slow","key":"single"})");
  Check(R"({"checks":[{"rule":"slow","key":"batched"},{"rule":"slow","key":"batched"},)"
        R"({"rule":"nope","key":"batched"},{"rule":"api","key":"allowed"}]})");

  const Answer slow = Call("GET", "/v1/top?rule=slow&n=5");
  EXPECT_EQ(slow.response.status, 200);
  EXPECT_EQ(slow.header("Cache-Control"), "no-store");
  json report = json::parse(slow.response.body);
  // The window: the four minutes before this one (on the system clock) and this one so far.
  EXPECT_GE(report.at("window_s").get<int>(), 240);
  EXPECT_LT(report.at("window_s").get<int>(), 300);
  report.erase("window_s");
  EXPECT_EQ(report, json::parse(R"({"rule":"slow","tracked":true,"denied":3,"max_error":0,)"
                                R"("keys":[{"key":"single","denied":2,"error":0},)"
                                R"({"key":"batched","denied":1,"error":0}]})"));

  const Answer top = Call("GET", "/v1/top?n=1");
  EXPECT_EQ(top.response.status, 200);
  const json rules = json::parse(top.response.body).at("rules");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].at("rule"), "api");
  EXPECT_EQ(rules[0].at("denied"), 0);  // allowed checks are not recorded
  EXPECT_EQ(rules[1].at("rule"), "slow");
  EXPECT_EQ(rules[1].at("keys"), json::parse(R"([{"key":"single","denied":2,"error":0}])"));
  EXPECT_EQ(rules[2].at("rule"), "window");

  EXPECT_EQ(Call("GET", "/v1/top?rule=nope").response.status, 404);
  EXPECT_EQ(Call("GET", "/v1/top?n=0").response.status, 400);
  EXPECT_EQ(Call("GET", "/v1/top?n=65").response.status, 400);
  const Answer post = Call("POST", "/v1/top");
  EXPECT_EQ(post.response.status, 405);
  EXPECT_EQ(post.header("Allow"), "GET");
}

TEST_F(ApiTest, AReloadForgetsTheTopKeysOfRulesItRemoves) {
  api_.SetExposeKeys(true);
  Check(R"({"rule":"slow","key":"k"})");
  Check(R"({"rule":"slow","key":"k"})");
  api_.SetRules(RuleTable::Build(ParseRules(R"(
rules: [{name: fresh, algorithm: fixed_window, limit: 2, period: 1s}]
)"),
                                 store_, metrics_));
  api_.SetRules(RuleTable::Build(ParseRules(kRules), store_, metrics_));
  EXPECT_NE(
      Call("GET", "/v1/top?rule=slow").response.body.find(R"("denied":0,"max_error":0,"keys":[])"),
      std::string::npos);
}

TEST_F(ApiTest, TheDashboardIsServedAtTheRoot) {
  for (std::string_view path : {"/", "/ui", "/ui/"}) {
    const Answer page = Call("GET", path);
    EXPECT_EQ(page.response.status, 200) << path;
    EXPECT_EQ(page.response.content_type, "text/html; charset=utf-8");
    EXPECT_NE(page.response.body.find("<title>sluice</title>"), std::string::npos);
    EXPECT_EQ(page.header("Content-Security-Policy"), kDashboardPolicy);
  }
  EXPECT_EQ(Call("GET", "/ui/app.js").response.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(Call("GET", "/ui/nothing.js").response.status, 404);
  const Answer post = Call("POST", "/");
  EXPECT_EQ(post.response.status, 405);
  EXPECT_EQ(post.header("Allow"), "GET");
}

constexpr std::string_view kPolicyRules = R"(
rules:
  - { name: open, algorithm: fixed_window, limit: 4, period: 1m }
  - { name: closed, algorithm: fixed_window, limit: 4, period: 1m, on_error: fail_closed }
  - { name: local, algorithm: fixed_window, limit: 4, period: 1m, on_error: local_fallback }
)";

// A rule in shadow mode is decided and counted as usual and always admits: its answer
// says allowed, carries the would-be verdict, and sends no Retry-After; the verdicts are counted
// in sluice_shadow_checks_total, the answers in sluice_checks_total.
constexpr std::string_view kShadowRules = R"(
rules:
  - { name: slow, algorithm: gcra, limit: 1, period: 10s, shadow_mode: true }
  - { name: api, algorithm: gcra, limit: 1, period: 10s }
)";

std::string MetricLine(const Metrics& metrics, std::string_view start) {
  const std::string text = metrics.Exposition();
  const size_t at = text.find(start);
  if (at == std::string::npos) return "<absent>";
  return text.substr(at, text.find('\n', at) - at);
}

TEST_F(ApiTest, AShadowRuleOverItsLimitAdmitsAndTellsTheWouldBeVerdict) {
  api_.SetRules(RuleTable::Build(ParseRules(kShadowRules), store_, metrics_));
  const Answer first = Check(R"({"rule":"slow","key":"k"})");
  EXPECT_EQ(first.response.body, R"({"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,)"
                                 R"("reset_after_ms":10000,"source":"store","degraded":false,)"
                                 R"("shadow":true,"would_allow":true})");
  const Answer over = Check(R"({"rule":"slow","key":"k"})");
  EXPECT_EQ(over.response.status, 200);
  EXPECT_EQ(over.response.body, R"({"allowed":true,"limit":1,"remaining":0,"retry_after_ms":10000,)"
                                R"("reset_after_ms":10000,"source":"store","degraded":false,)"
                                R"("shadow":true,"would_allow":false})");
  EXPECT_EQ(over.header("Retry-After"), "<absent>");
  EXPECT_EQ(over.header("RateLimit"), R"("slow";r=0;t=10)");

  EXPECT_EQ(metrics_.ForRule("slow").allowed.load(), 2u);
  EXPECT_EQ(metrics_.ForRule("slow").denied.load(), 0u);
  EXPECT_EQ(MetricLine(metrics_, "sluice_shadow_checks_total{rule=\"slow\",result=\"allowed\"}"),
            "sluice_shadow_checks_total{rule=\"slow\",result=\"allowed\"} 1");
  EXPECT_EQ(MetricLine(metrics_, "sluice_shadow_checks_total{rule=\"slow\",result=\"denied\"}"),
            "sluice_shadow_checks_total{rule=\"slow\",result=\"denied\"} 1");
  // An enforcing rule has no shadow samples, and no one was denied: no top keys.
  EXPECT_EQ(MetricLine(metrics_, "sluice_shadow_checks_total{rule=\"api\""), "<absent>");
  api_.SetExposeKeys(true);
  EXPECT_EQ(Call("GET", "/v1/top?rule=slow").response.body.find("\"k\""), std::string::npos);

  // The would-be denial took nothing, as an enforcing rule's denial takes nothing.
  clock_.Advance(seconds(10));
  EXPECT_NE(Check(R"({"rule":"slow","key":"k"})").response.body.find(R"("would_allow":true)"),
            std::string::npos);
}

TEST_F(ApiTest, ABatchAnswersEachRuleByItsOwnMode) {
  api_.SetRules(RuleTable::Build(ParseRules(kShadowRules), store_, metrics_));
  const Answer a = Check(R"({"checks":[
      {"rule":"slow","key":"k"}, {"rule":"slow","key":"k"},
      {"rule":"api","key":"k"}, {"rule":"api","key":"k"}]})");
  EXPECT_EQ(a.response.body,
            R"({"results":[)"
            R"({"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":10000,)"
            R"("source":"store","degraded":false,"shadow":true,"would_allow":true},)"
            R"({"allowed":true,"limit":1,"remaining":0,"retry_after_ms":10000,)"
            R"("reset_after_ms":10000,"source":"store","degraded":false,"shadow":true,)"
            R"("would_allow":false},)"
            R"({"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":10000,)"
            R"("source":"store","degraded":false},)"
            R"({"allowed":false,"limit":1,"remaining":0,"retry_after_ms":10000,)"
            R"("reset_after_ms":10000,"source":"store","degraded":false}]})");
  EXPECT_EQ(store_.batch_calls, 1);
  EXPECT_EQ(metrics_.ForRule("slow").shadow_denied.load(), 1u);
  EXPECT_EQ(metrics_.ForRule("slow").shadow_allowed.load(), 1u);
  EXPECT_EQ(metrics_.ForRule("api").denied.load(), 1u);
  EXPECT_EQ(metrics_.ForRule("api").shadow_denied.load(), 0u);
}

TEST_F(ApiTest, TheServersShadowModeIsEveryRulesDefault) {
  api_.SetRules(RuleTable::Build(ParseRules(R"(
server: { shadow_mode: true }
rules:
  - { name: slow, algorithm: gcra, limit: 1, period: 10s }
  - { name: api, algorithm: gcra, limit: 1, period: 10s, shadow_mode: false }
)"),
                                 store_, metrics_));
  Check(R"({"rule":"slow","key":"k"})");
  Check(R"({"rule":"api","key":"k"})");
  EXPECT_NE(Check(R"({"rule":"slow","key":"k"})").response.body.find(R"("allowed":true)"),
            std::string::npos);
  const Answer enforced = Check(R"({"rule":"api","key":"k"})");
  EXPECT_EQ(enforced.response.body.substr(0, 16), R"({"allowed":false)");
  EXPECT_EQ(enforced.header("Retry-After"), "10");
  EXPECT_EQ(metrics_.ForRule("slow").shadow_denied.load(), 1u);
}

TEST_F(ApiTest, AReloadTurnsShadowModeOnAndOff) {
  const auto load = [&](bool shadow) {
    api_.SetRules(RuleTable::Build(
        ParseRules(std::string("rules: [{name: slow, algorithm: gcra, limit: 1, period: 10s, "
                               "shadow_mode: ") +
                   (shadow ? "true" : "false") + "}]"),
        store_, metrics_));
  };
  EXPECT_EQ(Check(R"({"rule":"slow","key":"k"})").response.body.substr(0, 15),
            R"({"allowed":true)");
  EXPECT_EQ(Check(R"({"rule":"slow","key":"k"})").response.body.substr(0, 16),
            R"({"allowed":false)");
  load(true);
  const Answer shadowed = Check(R"({"rule":"slow","key":"k"})");
  EXPECT_EQ(shadowed.response.body.substr(0, 15), R"({"allowed":true)");
  EXPECT_NE(shadowed.response.body.find(R"("would_allow":false)"), std::string::npos);
  load(false);
  const Answer enforced = Check(R"({"rule":"slow","key":"k"})");
  EXPECT_EQ(enforced.response.body.substr(0, 16), R"({"allowed":false)");
  EXPECT_EQ(enforced.response.body.find("shadow"), std::string::npos);
  // The shadow counts stay exposed once the rule has been in shadow mode.
  EXPECT_EQ(MetricLine(metrics_, "sluice_shadow_checks_total{rule=\"slow\",result=\"denied\"}"),
            "sluice_shadow_checks_total{rule=\"slow\",result=\"denied\"} 1");
  EXPECT_EQ(metrics_.ForRule("slow").denied.load(), 2u);
}

// A rule's lease terms go with each of its checks to the store (a LeasingStore in `sluice serve`).
TEST_F(ApiTest, ARulesLeaseTermsGoWithEachOfItsChecks) {
  api_.SetRules(RuleTable::Build(ParseRules(R"(
rules:
  - { name: hot, algorithm: gcra, limit: 100, period: 1m, lease: { units: 10, lifetime: 1s } }
  - { name: api, algorithm: gcra, limit: 100, period: 1m }
)"),
                                 store_, metrics_));
  const LeaseTerms terms{.units = 10, .lifetime = seconds(1)};
  EXPECT_EQ(api_.rules()->Find("hot")->limiter.lease(), terms);
  Check(R"({"rule":"hot","key":"k"})");
  EXPECT_EQ(store_.last_lease, terms);
  Check(R"({"rule":"api","key":"k"})");
  EXPECT_EQ(store_.last_lease, LeaseTerms{});
}

// The service as `sluice serve` runs it on a shared store: a ResilientStore in front.
class ResilientApiTest : public ::testing::Test {
 protected:
  ResilientApiTest()
      : backend_(clock_),
        resilient_(
            backend_,
            ResilientStoreOptions{
                .clock = &clock_, .failures_to_open = 3, .open_for = seconds(1), .instances = 2}),
        api_(resilient_, metrics_, RuleTable::Build(ParseRules(kPolicyRules), resilient_, metrics_),
             &resilient_) {
    metrics_.Watch(resilient_);
  }

  Answer Call(std::string_view method, std::string_view target, std::string_view body = "") {
    return CallApi(api_, method, target, body);
  }
  std::string Check(std::string_view rule) {
    const Answer a =
        Call("POST", "/v1/check", R"({"rule":")" + std::string(rule) + R"(","key":"k"})");
    EXPECT_EQ(a.response.status, 200);
    return a.response.body;
  }
  bool Exposes(std::string_view line) {
    return Call("GET", "/metrics").response.body.find(line) != std::string::npos;
  }

  ManualClock clock_;
  RecordingStore backend_;
  ResilientStore resilient_;
  Metrics metrics_;
  Api api_;
};

TEST_F(ResilientApiTest, WhileTheStoreAnswersItDecides) {
  const std::string decision = Check("closed");
  EXPECT_TRUE(
      decision.starts_with(R"({"allowed":true,"limit":4,"remaining":3,"retry_after_ms":0,)"))
      << decision;
  EXPECT_TRUE(decision.ends_with(R"("source":"store","degraded":false})")) << decision;
  const Answer ready = Call("GET", "/readyz");
  EXPECT_EQ(ready.response.status, 200);
  EXPECT_EQ(ready.response.body, R"({"status":"ready","breaker":"closed"})");
  EXPECT_TRUE(Exposes("sluice_decisions_total{rule=\"closed\",source=\"store\"} 1\n"));
  EXPECT_TRUE(Exposes("sluice_breaker_state{state=\"closed\"} 1\n"));
}

TEST_F(ResilientApiTest, WhenTheStoreFailsEachRuleDecidesByItsPolicy) {
  backend_.failure = Status::Unavailable("down");
  EXPECT_EQ(Check("open"), R"({"allowed":true,"limit":4,"remaining":0,"retry_after_ms":0,)"
                           R"("reset_after_ms":0,"source":"fail_open","degraded":true})");
  EXPECT_EQ(Check("closed"), R"({"allowed":false,"limit":4,"remaining":0,"retry_after_ms":1000,)"
                             R"("reset_after_ms":0,"source":"fail_closed","degraded":true})");
  // 4 per minute shared by 2 instances: this one admits 2.
  EXPECT_NE(Check("local").find(R"("allowed":true)"), std::string::npos);
  EXPECT_NE(Check("local").find(R"("allowed":true)"), std::string::npos);
  const std::string third = Check("local");
  EXPECT_NE(third.find(R"("allowed":false)"), std::string::npos) << third;
  EXPECT_NE(third.find(R"("source":"local_fallback","degraded":true)"), std::string::npos);

  EXPECT_EQ(metrics_.store_errors(), 5u);
  EXPECT_EQ(metrics_.ForRule("local").allowed.load(), 2u);
  EXPECT_TRUE(Exposes("sluice_decisions_total{rule=\"open\",source=\"fail_open\"} 1\n"));
  EXPECT_TRUE(Exposes("sluice_decisions_total{rule=\"closed\",source=\"fail_closed\"} 1\n"));
  EXPECT_TRUE(Exposes("sluice_decisions_total{rule=\"local\",source=\"local_fallback\"} 3\n"));
}

TEST_F(ResilientApiTest, ReadinessFollowsTheBreakerAndClosesItWithoutTraffic) {
  backend_.failure = Status::Unavailable("down");
  for (int i = 0; i < 3; ++i) Check("open");  // three failures open the breaker
  EXPECT_TRUE(Exposes("sluice_breaker_state{state=\"open\"} 1\n"));
  EXPECT_TRUE(Exposes("sluice_breaker_opens_total 1\n"));
  // The backend is one failure domain, with no name.
  EXPECT_TRUE(Exposes("sluice_node_breaker_state{node=\"\",state=\"open\"} 1\n"));
  EXPECT_TRUE(Exposes("sluice_node_breaker_state{node=\"\",state=\"closed\"} 0\n"));
  EXPECT_TRUE(Exposes("sluice_node_breaker_opens_total{node=\"\"} 1\n"));

  const int calls = backend_.batch_calls;
  Answer ready = Call("GET", "/readyz");
  EXPECT_EQ(ready.response.status, 503);
  EXPECT_EQ(ready.response.body,
            R"({"error":"store unavailable: circuit breaker open: the store failed repeatedly",)"
            R"("breaker":"open"})");
  EXPECT_EQ(backend_.batch_calls, calls);  // no call while open
  EXPECT_NE(Check("open").find(R"("source":"fail_open")"), std::string::npos);
  EXPECT_EQ(backend_.batch_calls, calls);

  backend_.failure = Status();
  clock_.Advance(seconds(1));
  ready = Call("GET", "/readyz");  // the probe goes through and closes the breaker
  EXPECT_EQ(ready.response.status, 200);
  EXPECT_EQ(ready.response.body, R"({"status":"ready","breaker":"closed"})");
  EXPECT_EQ(backend_.keys(), 0u);  // a peek writes nothing
  EXPECT_NE(Check("open").find(R"("source":"store")"), std::string::npos);
}

// Behind the ResilientStore, as `sluice serve` runs on Redis, only an outage is for a rule's
// failure policy. A fault of the store (a Lua script's error) is refused under every policy,
// fail_open included, in a check, a batch and an acquire, and a full store likewise, with
// Retry-After; neither opens the breaker. Before, each was decided by the policy: fail_open
// admitted it.
TEST_F(ResilientApiTest, StoreFaultsAreRefusedUnderEveryPolicy) {
  const std::string fault = "ERR user_script:1: attempt to compare nil with number";
  const std::string error = R"({"error":")" + fault + R"("})";
  backend_.failure = Status::Internal(fault);
  for (std::string_view rule : {"open", "closed", "local"}) {
    const Answer a =
        Call("POST", "/v1/check", R"({"rule":")" + std::string(rule) + R"(","key":"k"})");
    EXPECT_EQ(a.response.status, 500) << rule;
    EXPECT_EQ(a.response.body, error) << rule;
  }
  const Answer batch = Call("POST", "/v1/check",
                            R"({"checks":[{"rule":"open","key":"a"},{"rule":"local","key":"b"}]})");
  EXPECT_EQ(batch.response.status, 200);
  EXPECT_EQ(batch.response.body, R"({"results":[)" + error + "," + error + "]}");

  ManualTimers timers(clock_);
  Api acquiring(resilient_, metrics_,
                RuleTable::Build(ParseRules(kPolicyRules), resilient_, metrics_), &resilient_,
                &timers);
  const Answer acquired =
      CallApi(acquiring, "POST", "/v1/acquire", R"({"rule":"open","key":"k","max_wait_ms":1000})");
  EXPECT_EQ(acquired.response.status, 500);
  EXPECT_EQ(acquired.response.body, error);

  backend_.failure = Status::ResourceExhausted("memory store is full (10000000 keys)");
  const Answer full = Call("POST", "/v1/check", R"({"rule":"open","key":"fresh"})");
  EXPECT_EQ(full.response.status, 503);
  EXPECT_EQ(full.header("Retry-After"), "1");

  const StoreHealthStats stats = resilient_.stats();
  EXPECT_EQ(stats.fail_open + stats.fail_closed + stats.local_fallback, 0u);
  EXPECT_EQ(stats.breaker, BreakerState::kClosed);
  EXPECT_EQ(metrics_.ForRule("open").allowed.load(), 0u);
}

TEST_F(ResilientApiTest, HotKeyCacheHitsAreCounted) {
  for (int i = 0; i < 4; ++i) Check("open");
  const int calls = backend_.batch_calls;
  EXPECT_NE(Check("open").find(R"("allowed":false,)"), std::string::npos);  // the store denies
  EXPECT_NE(Check("open").find(R"("source":"hot_key_cache","degraded":false)"), std::string::npos);
  EXPECT_EQ(backend_.batch_calls, calls + 1);
  EXPECT_TRUE(Exposes("sluice_hot_key_cache_hits_total 1\n"));
}

}  // namespace
}  // namespace sluice::http
