// GET /metrics through the Api: the service's metrics, then the lines of the front end beside the
// Api's own (SetJsonRoute), then the requests refused before any handler, every reason counted.
#include "http/metrics_handler.h"

#include <gtest/gtest.h>

#include <string>

#include "auth/callers.h"
#include "config/config.h"
#include "http/api.h"
#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

Response Get(Api& api, std::string_view target) {
  bool answered = false;
  Exchange exchange([&answered] { answered = true; });
  api.Handle({"GET", target, ""}, exchange);
  EXPECT_TRUE(answered) << target;
  return exchange.response;
}

std::shared_ptr<const auth::CallerTable> OneCaller() {
  auto config = config::ParseConfig(
      "rules: [{name: api, algorithm: gcra, limit: 10, period: 1s}]\n"
      "server:\n"
      "  auth:\n"
      "    callers:\n"
      "      - {name: ops, token_sha256: \"" +
          std::string(64, 'a') + "\", scopes: [metrics]}\n",
      "callers.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return auth::CallerTable::Build(config->server.auth);
}

TEST(MetricsHandlerTest, TheFrontEndsLinesFollowTheServicesAndTheAuthRefusalsEnd) {
  MemoryStore store;
  Metrics metrics;
  Api api(store, metrics, RuleTable::Build({}, store, metrics));
  const std::string front_end = "sluice_rls_test_total 3\n";
  api.SetJsonRoute(
      [](std::string_view, core::FairAdmission::Caller, JsonDone done) { done(200, "{}"); },
      [&front_end] { return front_end; });
  api.SetCallers(OneCaller());
  EXPECT_EQ(Get(api, "/metrics").status, 401);  // no token: refused, counted "missing"
  api.SetCallers(nullptr);

  const Response response = Get(api, "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.content_type, "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = response.body;
  const size_t service = text.find("sluice_http_requests_total{");
  const size_t front = text.find(front_end + "# HELP sluice_auth_refused_total ");
  ASSERT_NE(service, std::string::npos) << text;
  ASSERT_NE(front, std::string::npos) << text;
  EXPECT_LT(service, front);
  EXPECT_NE(text.find("sluice_auth_refused_total{reason=\"missing\"} 1\n"), std::string::npos);
  EXPECT_TRUE(text.ends_with("sluice_auth_refused_total{reason=\"throttled\"} 0\n")) << text;
}

}  // namespace
}  // namespace sluice::http
