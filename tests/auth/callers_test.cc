// The caller table of server.auth: the config that builds it (refused when bad, with the file,
// line and field), Authenticate's Bearer parsing, and what each caller's scopes and rules allow.
#include "auth/callers.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace sluice::auth {
namespace {

// SHA-256 of "checkout-token" and "ops-token" (printf %s TOKEN | sha256sum).
constexpr std::string_view kCheckoutHash =
    "f73b9044d0a39db82876ca2560ec62234efc73e2560689b5b5a3fc92f70904e3";
constexpr std::string_view kOpsHash =
    "d9310c002af91822beb0b3487d8b04f85bf6bf1f8a5496bff7d35fc7c5a29def";

std::string ConfigWith(std::string_view callers) {
  return "rules:\n"
         "  - {name: api, algorithm: gcra, limit: 10, period: 1s}\n"
         "  - {name: login, algorithm: gcra, limit: 10, period: 1s}\n"
         "  - {name: other, algorithm: gcra, limit: 10, period: 1s}\n"
         "server:\n"
         "  auth:\n"
         "    callers:\n" +
         std::string(callers);
}

std::string CallerLine(std::string_view name, std::string_view hash, std::string_view rest) {
  return "      - {name: " + std::string(name) + ", token_sha256: \"" + std::string(hash) + "\", " +
         std::string(rest) + "}\n";
}

std::string ParseError(const std::string& yaml) {
  auto config = config::ParseConfig(yaml, "s.yaml");
  return config.ok() ? "parsed" : config.status().message();
}

std::shared_ptr<const CallerTable> Table() {
  auto config = config::ParseConfig(
      ConfigWith(CallerLine("checkout", kCheckoutHash, "scopes: [check], rules: [api, login]") +
                 CallerLine("ops", kOpsHash, "scopes: [admin, metrics]")),
      "s.yaml");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return CallerTable::Build(config->server.auth);
}

TEST(CallersConfigTest, ParsesCallersWithTheirScopesAndRules) {
  auto config = config::ParseConfig(
      ConfigWith(CallerLine("checkout", kCheckoutHash, "scopes: [check], rules: [api, login]") +
                 CallerLine("ops", kOpsHash, "scopes: [admin, metrics]")),
      "s.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  const config::AuthConfig& auth = config->server.auth;
  ASSERT_TRUE(auth.enabled);
  ASSERT_EQ(auth.callers.size(), 2u);
  EXPECT_EQ(auth.callers[0].name, "checkout");
  ASSERT_TRUE(auth.callers[0].token_sha256.has_value());
  EXPECT_EQ((*auth.callers[0].token_sha256)[0], 0xf7);
  EXPECT_EQ((*auth.callers[0].token_sha256)[31], 0xe3);
  EXPECT_EQ(auth.callers[0].scopes, config::kScopeCheck);
  EXPECT_EQ(auth.callers[0].rules, (std::vector<std::string>{"api", "login"}));
  EXPECT_EQ(auth.callers[1].scopes, config::kScopeAdmin | config::kScopeMetrics);
  EXPECT_FALSE(auth.callers[1].rules.has_value());
}

TEST(CallersConfigTest, WithoutAnAuthSectionNothingIsEnabled) {
  auto config = config::ParseConfig(
      "rules:\n  - {name: api, algorithm: gcra, limit: 10, period: 1s}\n", "s.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->server.auth.enabled);
  EXPECT_FALSE(CallerTable::Build(config->server.auth)->enabled());
}

TEST(CallersConfigTest, RefusesBadCallersNamingFileLineAndField) {
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", "abc", "scopes: [check]"))),
            "s.yaml:8: server.auth.callers[0].token_sha256: expected the 64 hex digits of the "
            "token's SHA-256 (never the token), got 3 characters");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", std::string(63, 'a') + "g", "scopes: [check]"))),
            "s.yaml:8: server.auth.callers[0].token_sha256: expected the 64 hex digits of the "
            "token's SHA-256, found a character that is not a hex digit");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check, root]"))),
            "s.yaml:8: server.auth.callers[0].scopes[1]: unknown scope 'root' (expected check, "
            "admin or metrics)");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: []"))),
            "s.yaml:8: server.auth.callers[0].scopes: expected at least one scope");
  EXPECT_EQ(
      ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check], rules: [api, nope]"))),
      "s.yaml:8: server.auth.callers[0].rules[1]: no rule named 'nope'");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check]") +
                                  CallerLine("a", kCheckoutHash, "scopes: [check]"))),
            "s.yaml:9: server.auth.callers[1].name: duplicate caller name 'a'");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check]") +
                                  CallerLine("b", kOpsHash, "scopes: [check]"))),
            "s.yaml:9: server.auth.callers[1].token_sha256: the same token as caller 'a'");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check], san: [x]"))),
            "s.yaml:8: server.auth.callers[0].san: unknown field (expected name, "
            "token_sha256, client_san, scopes, rules, domains)");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check], client_san: []"))),
            "s.yaml:8: server.auth.callers[0].client_san: expected a non-empty list of subject "
            "alternative names");
  EXPECT_EQ(
      ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check], client_san: [\"a b\"]"))),
      "s.yaml:8: server.auth.callers[0].client_san[0]: expected a DNS or URI name: 1 to 1024 "
      "printable ASCII characters, no spaces");
  EXPECT_EQ(ParseError(ConfigWith("      - {name: a, client_san: [x, y], scopes: [check]}\n"
                                  "      - {name: b, client_san: [y], scopes: [check]}\n")),
            "s.yaml:9: server.auth.callers[1].client_san[0]: 'y' is already caller 'a''s");
  EXPECT_EQ(ParseError(ConfigWith(CallerLine("a", kOpsHash, "scopes: [check], domains: [d]"))),
            "s.yaml:8: server.auth.callers[0].domains: RLS domains need the rate limit service "
            "(rls.config_dir)");
  EXPECT_EQ(ParseError(ConfigWith("      - {name: a, scopes: [check]}\n")),
            "s.yaml:8: server.auth.callers[0].token_sha256: expected token_sha256, client_san or "
            "both");
}

TEST(CallerTableTest, AuthenticatesABearerTokenByItsHash) {
  auto table = Table();
  ASSERT_TRUE(table->enabled());
  auto known = table->Authenticate("Bearer checkout-token");
  ASSERT_NE(known.caller, nullptr);
  EXPECT_EQ(known.caller->name, "checkout");
  auto scheme_case = table->Authenticate("bearer  ops-token ");
  ASSERT_NE(scheme_case.caller, nullptr);
  EXPECT_EQ(scheme_case.caller->name, "ops");

  for (std::optional<std::string_view> missing :
       {std::optional<std::string_view>(), std::optional<std::string_view>("Bearer"),
        std::optional<std::string_view>("Bearer   "),
        std::optional<std::string_view>("Basic Y2hlY2tvdXQ6eA=="),
        std::optional<std::string_view>("checkout-token")}) {
    auto refused = table->Authenticate(missing);
    EXPECT_EQ(refused.caller, nullptr);
    EXPECT_EQ(refused.refusal, AuthRefusal::kMissing) << missing.value_or("(none)");
  }
  for (std::string_view unknown : {"Bearer checkout-token2", "Bearer checkout-toke",
                                   "Bearer f73b9044d0a39db82876ca2560ec6223"
                                   "4efc73e2560689b5b5a3fc92f70904e3"}) {
    auto refused = table->Authenticate(unknown);
    EXPECT_EQ(refused.caller, nullptr);
    EXPECT_EQ(refused.refusal, AuthRefusal::kUnknown) << unknown;
  }
}

TEST(CallerTableTest, ScopesAndRulesAllowOnlyWhatTheConfigGives) {
  auto table = Table();
  const Caller& checkout = *table->Authenticate("Bearer checkout-token").caller;
  const Caller& ops = *table->Authenticate("Bearer ops-token").caller;
  struct Case {
    const Caller& caller;
    config::Scope scope;
    bool allowed;
  };
  for (const Case& c :
       {Case{checkout, config::kScopeCheck, true}, Case{checkout, config::kScopeAdmin, false},
        Case{checkout, config::kScopeMetrics, false}, Case{ops, config::kScopeCheck, false},
        Case{ops, config::kScopeAdmin, true}, Case{ops, config::kScopeMetrics, true}}) {
    EXPECT_EQ(CallerTable::Allows(c.caller, c.scope), c.allowed) << c.caller.name << c.scope;
  }
  EXPECT_TRUE(CallerTable::AllowsRule(checkout, "api"));
  EXPECT_TRUE(CallerTable::AllowsRule(checkout, "login"));
  EXPECT_FALSE(CallerTable::AllowsRule(checkout, "other"));
  EXPECT_TRUE(CallerTable::AllowsRule(ops, "other"));  // no list: any rule
  EXPECT_TRUE(CallerTable::AllowsDomain(checkout, "anything"));
}

// A caller known by its client certificate: any one of the certificate's names picks it, a
// name of no caller's picks none, and a certificate naming two callers identifies neither.
TEST(CallerTableTest, FindsACallerByItsClientCertificateNames) {
  auto config = config::ParseConfig(
      ConfigWith(
          "      - {name: envoy, client_san: [envoy.mesh.internal, \"spiffe://mesh/envoy\"], "
          "scopes: [check]}\n" +
          CallerLine("ops", kOpsHash, "client_san: [ops.internal], scopes: [admin]")),
      "s.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_FALSE(config->server.auth.callers[0].token_sha256.has_value());
  auto table = CallerTable::Build(config->server.auth);
  using Names = std::vector<std::string>;
  for (const Names& names : {Names{"envoy.mesh.internal"}, Names{"x", "spiffe://mesh/envoy"}}) {
    const Caller* caller = table->ByClientSans(names);
    ASSERT_NE(caller, nullptr) << names.back();
    EXPECT_EQ(caller->name, "envoy");
  }
  EXPECT_EQ(table->ByClientSans(Names{"ops.internal"})->name, "ops");
  // Both credentials identify ops.
  EXPECT_EQ(table->Authenticate("Bearer ops-token").caller->name, "ops");
  for (const Names& names : {Names{}, Names{"envoy.mesh"}, Names{"ENVOY.mesh.internal"},
                             Names{"envoy.mesh.internal", "ops.internal"}}) {
    EXPECT_EQ(table->ByClientSans(names), nullptr) << names.size();
  }
  // A caller without a token is never matched by one.
  EXPECT_EQ(table->Authenticate("Bearer ").refusal, AuthRefusal::kMissing);
}

}  // namespace
}  // namespace sluice::auth
