// envoyproxy/ratelimit's YAML configuration as sluice reads it: every field, sluice's optional
// extensions, the sluice Limit each rate limit becomes, directories of files, and the errors (each
// naming the file, the line and the field).
#include "rls/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace sluice::rls {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

DomainConfig Parse(std::string_view yaml) {
  auto config = ParseDomainConfig(yaml, "rl.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : DomainConfig{};
}

// The error's message, which must start with `prefix` (file:line: field:).
void ExpectError(std::string_view yaml, std::string_view prefix, std::string_view contains = "") {
  auto config = ParseDomainConfig(yaml, "rl.yaml");
  ASSERT_FALSE(config.ok()) << "accepted:\n" << yaml;
  const std::string message = config.status().message();
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(message.starts_with(prefix)) << message;
  EXPECT_NE(message.find(contains), std::string::npos) << message;
}

TEST(RlsConfig, NestedDescriptorsAndDefaults) {
  const DomainConfig config = Parse(R"(
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
)");
  EXPECT_EQ(config.domain, "messaging");
  EXPECT_EQ(config.file, "rl.yaml");
  ASSERT_EQ(config.descriptors.size(), 2u);
  const Descriptor& marketing = config.descriptors[0];
  EXPECT_EQ(marketing.key, "message_type");
  EXPECT_EQ(marketing.value, "marketing");
  EXPECT_EQ(marketing.full_key, "messaging.message_type_marketing");
  EXPECT_FALSE(marketing.rule.has_value());
  ASSERT_EQ(marketing.descriptors.size(), 1u);
  const Descriptor& nested = marketing.descriptors[0];
  EXPECT_EQ(nested.full_key, "messaging.message_type_marketing.to_number");
  EXPECT_EQ(nested.value, "");
  ASSERT_TRUE(nested.rule.has_value());
  EXPECT_FALSE(nested.rule->unlimited);
  ASSERT_EQ(nested.rule->limits.size(), 1u);
  const RateLimitSpec& spec = nested.rule->limits[0];
  EXPECT_EQ(spec.requests_per_unit, 5u);
  EXPECT_EQ(spec.unit, Unit::kDay);
  EXPECT_EQ(spec.name, "");
  EXPECT_EQ(spec.on_error, std::nullopt);
  // The default algorithm is that service's: a fixed window of the unit.
  ASSERT_TRUE(spec.limit.has_value());
  EXPECT_EQ(spec.limit->algorithm(), Algorithm::kFixedWindow);
  EXPECT_EQ(spec.limit->count(), 5);
  EXPECT_EQ(spec.limit->period(), hours(24));
  EXPECT_FALSE(nested.shadow_mode || nested.quota_mode || nested.detailed_metric ||
               nested.value_to_metric || nested.share_threshold);
  EXPECT_TRUE(nested.metadata.is_null());
}

TEST(RlsConfig, EveryUnitBecomesItsFixedPeriod) {
  const struct {
    const char* name;
    Duration period;
  } cases[] = {{"second", seconds(1)},    {"minute", seconds(60)}, {"hour", hours(1)},
               {"day", hours(24)},        {"week", hours(24 * 7)}, {"month", hours(24 * 30)},
               {"YEAR", hours(24 * 365)}, {"Minute", seconds(60)}};
  for (const auto& c : cases) {
    const DomainConfig config = Parse(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: "
        "{unit: " +
        std::string(c.name) + ", requests_per_unit: 3}\n");
    ASSERT_EQ(config.descriptors.size(), 1u) << c.name;
    const RateLimitSpec& spec = config.descriptors[0].rule->limits[0];
    ASSERT_TRUE(spec.limit.has_value()) << c.name;
    EXPECT_EQ(spec.limit->period(), c.period) << c.name;
    EXPECT_EQ(spec.limit->count(), 3) << c.name;
  }
}

TEST(RlsConfig, ZeroRequestsPerUnitDeniesEverything) {
  const DomainConfig config = Parse(R"(
domain: edge
descriptors:
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: absent_count
    rate_limit: {unit: second}
)");
  for (const Descriptor& d : config.descriptors) {
    const RateLimitSpec& spec = d.rule->limits[0];
    EXPECT_EQ(spec.requests_per_unit, 0u) << d.key;
    EXPECT_FALSE(spec.limit.has_value()) << d.key;
  }
}

TEST(RlsConfig, UnlimitedNamesReplacesAndFlags) {
  const DomainConfig config = Parse(R"(
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
      name: ldap_free
      replaces:
        - name: per_user
  - key: user
    shadow_mode: true
    quota_mode: yes
    detailed_metric: True
    value_to_metric: on
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 100
      replaces: [{name: a}, {name: b}]
  - key: files
    value: files/*
    share_threshold: true
    metadata:
      team: storage
      tier: 2
      ratio: 0.5
      quoted: "7"
      on_call: false
      none: ~
      tags: [a, 1]
      nested: {x: z}
      short_yes: y
    rate_limit: {unit: hour, requests_per_unit: 10}
)");
  ASSERT_EQ(config.descriptors.size(), 3u);
  const Rule& ldap = *config.descriptors[0].rule;
  EXPECT_TRUE(ldap.unlimited);
  EXPECT_TRUE(ldap.limits.empty());
  EXPECT_EQ(ldap.replaces, std::vector<std::string>{"per_user"});

  const Descriptor& user = config.descriptors[1];
  EXPECT_TRUE(user.shadow_mode);
  EXPECT_TRUE(user.quota_mode);
  EXPECT_TRUE(user.detailed_metric);
  EXPECT_TRUE(user.value_to_metric);
  EXPECT_FALSE(user.share_threshold);
  EXPECT_EQ(user.rule->limits[0].name, "per_user");
  EXPECT_EQ(user.rule->replaces, (std::vector<std::string>{"a", "b"}));

  const Descriptor& files = config.descriptors[2];
  EXPECT_TRUE(files.share_threshold);
  EXPECT_EQ(files.value, "files/*");
  EXPECT_EQ(files.metadata, nlohmann::json::parse(R"({"team": "storage", "tier": 2.0,
      "ratio": 0.5, "quoted": "7", "on_call": false, "none": null, "tags": ["a", 1.0],
      "nested": {"x": "z"}, "short_yes": true})"));
  EXPECT_TRUE(files.metadata["tier"].is_number_float());
}

TEST(RlsConfig, ScalarValuesReadAsText) {
  // That service's YAML library reads any scalar into its string fields.
  const DomainConfig config = Parse(R"(
domain: 42
descriptors:
  - key: port
    value: 8080
    rate_limit: {unit: second, requests_per_unit: 5}
)");
  EXPECT_EQ(config.domain, "42");
  EXPECT_EQ(config.descriptors[0].value, "8080");
  EXPECT_EQ(config.descriptors[0].rule->limits[0].requests_per_unit, 5u);
}

TEST(RlsConfig, NullFieldsAreAbsent) {
  const DomainConfig config = Parse(R"(
domain: d
descriptors:
  - key: k
    value:
    rate_limit:
    descriptors:
    shadow_mode:
)");
  ASSERT_EQ(config.descriptors.size(), 1u);
  EXPECT_EQ(config.descriptors[0].value, "");
  EXPECT_FALSE(config.descriptors[0].rule.has_value());
  EXPECT_TRUE(config.descriptors[0].descriptors.empty());
}

TEST(RlsConfig, DomainWithoutDescriptors) {
  EXPECT_TRUE(Parse("domain: quiet\n").descriptors.empty());
}

TEST(RlsConfig, SluiceExtensions) {
  const DomainConfig config = Parse(R"(
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 10
      algorithm: gcra
      burst: 20
      on_error: local_fallback
  - key: tenant
    rate_limits:
      - {unit: second, requests_per_unit: 100, algorithm: token_bucket, name: tenant_s}
      - {unit: hour, requests_per_unit: 100000, on_error: fail_closed, replaces: [{name: x}]}
      - {unit: day, requests_per_unit: 0, replaces: [{name: x}, {name: y}]}
)");
  const RateLimitSpec& user = config.descriptors[0].rule->limits[0];
  ASSERT_TRUE(user.limit.has_value());
  EXPECT_EQ(*user.limit, *Limit::Create(Algorithm::kGcra, 10, seconds(1), 20));
  EXPECT_EQ(user.on_error, FailurePolicy::kLocalFallback);

  const Rule& tenant = *config.descriptors[1].rule;
  ASSERT_EQ(tenant.limits.size(), 3u);
  EXPECT_EQ(*tenant.limits[0].limit, *Limit::Create(Algorithm::kTokenBucket, 100, seconds(1)));
  EXPECT_EQ(tenant.limits[0].name, "tenant_s");
  EXPECT_EQ(tenant.limits[0].on_error, std::nullopt);
  EXPECT_EQ(*tenant.limits[1].limit, *Limit::Create(Algorithm::kFixedWindow, 100000, hours(1)));
  EXPECT_EQ(tenant.limits[1].on_error, FailurePolicy::kFailClosed);
  EXPECT_FALSE(tenant.limits[2].limit.has_value());
  // The rule's replaces: every limit's, once each.
  EXPECT_EQ(tenant.replaces, (std::vector<std::string>{"x", "y"}));
}

TEST(RlsConfig, YearLongLimitsFitSluiceBounds) {
  // A year is 365 days, inside Limit's 366: every algorithm takes it.
  for (const char* algorithm :
       {"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"}) {
    const DomainConfig config = Parse(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, "
        "requests_per_unit: 7, algorithm: " +
        std::string(algorithm) + "}\n");
    ASSERT_EQ(config.descriptors.size(), 1u) << algorithm;
    EXPECT_EQ(config.descriptors[0].rule->limits[0].limit->period(), hours(24 * 365));
  }
}

TEST(RlsConfig, ErrorsNameFileLineAndField) {
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    rate_limt: {unit: second}\n",
              "rl.yaml:4: descriptors[0].rate_limt: unknown field (expected key, value, ");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n",
              "rl.yaml:5: descriptors[0].rate_limit.unit: unknown unit 'fortnight'");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1\n",
              "rl.yaml:5: descriptors[0].rate_limit.unit: missing required field");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n"
      "        rate_limit: {unit: second, requests_per_unit: 1, color: red}\n",
      "rl.yaml:6: descriptors[0].descriptors[0].rate_limit.color: unknown field");
  ExpectError("domain: d\nlimits: []\n", "rl.yaml:2: limits: unknown field");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    key: j\n",
              "rl.yaml:4: descriptors[0].key: field given twice");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: -1\n",
      "rl.yaml:6: descriptors[0].rate_limit.requests_per_unit: must be between 0 and "
      "4294967295");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 4294967296\n",
      "rl.yaml:6: descriptors[0].rate_limit.requests_per_unit: must be between");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: ten\n",
      "rl.yaml:6: descriptors[0].rate_limit.requests_per_unit: expected an integer, got "
      "'ten'");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: \"5\"\n",
      "rl.yaml:6: descriptors[0].rate_limit.requests_per_unit: expected an integer");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n",
              "rl.yaml:4: descriptors[0].shadow_mode: expected true or false");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    value: [a]\n",
              "rl.yaml:4: descriptors[0].value: expected a string");
  ExpectError("domain: d\ndescriptors:\n  key: k\n", "rl.yaml:3: descriptors: expected a list");
  ExpectError("domain: d\ndescriptors:\n  - k\n",
              "rl.yaml:3: descriptors[0]: expected a mapping of fields");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    metadata: [1]\n",
              "rl.yaml:4: descriptors[0].metadata: expected a mapping");
}

TEST(RlsConfig, ServiceRulesAreErrors) {
  // The checks envoyproxy/ratelimit makes, with sluice's place in the file.
  ExpectError("descriptors: []\n", "rl.yaml:1: domain: a config file needs a non-empty domain");
  ExpectError("domain: \"\"\n", "rl.yaml:1: domain: a config file needs a non-empty domain");
  ExpectError("", "rl.yaml: domain: the file is empty");
  ExpectError("domain: d\ndescriptors:\n  - value: v\n",
              "rl.yaml:3: descriptors[0].key: a descriptor needs a non-empty key");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
              "rl.yaml:5: descriptors[1].key: duplicate descriptor composite key 'd.k_v'");
  // Key-only "a_b" and key "a" with value "b" are one composite key there too.
  ExpectError("domain: d\ndescriptors:\n  - key: a_b\n  - key: a\n    value: b\n",
              "rl.yaml:4: descriptors[1].key: duplicate descriptor composite key 'd.a_b'");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: day}\n",
              "rl.yaml:4: descriptors[0].rate_limit.unit: does not apply to an unlimited");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n"
      "      replaces:\n        - name: \"\"\n",
      "rl.yaml:7: descriptors[0].rate_limit.replaces[0].name: a replaces entry needs a "
      "name");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n"
      "      name: me\n      replaces: [{name: me}]\n",
      "rl.yaml:7: descriptors[0].rate_limit.replaces[0].name: a rate limit cannot "
      "replace itself ('me')");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    value: exact\n    share_threshold: true\n",
              "rl.yaml:5: descriptors[0].share_threshold: applies only to a wildcard value");
  ExpectError("domain: d\ndescriptors: [{key: k, rate_limit: {unit: day}}\n",
              "rl.yaml:3: (syntax): ");
  ExpectError("- domain: d\n", "rl.yaml:1: (top level): expected a mapping of fields");
}

TEST(RlsConfig, ExtensionErrors) {
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 5\n      algorithm: fixed_window\n      burst: 9\n",
      "rl.yaml:8: descriptors[0].rate_limit.burst: burst applies to token_bucket");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 5\n      algorithm: magic\n",
      "rl.yaml:7: descriptors[0].rate_limit.algorithm: unknown algorithm 'magic'");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 5\n      on_error: panic\n",
      "rl.yaml:7: descriptors[0].rate_limit.on_error: unknown failure policy 'panic'");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 2000000000\n",
      "rl.yaml:6: descriptors[0].rate_limit.requests_per_unit: limit 2000000000 is above "
      "the maximum");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 200000\n      algorithm: sliding_log\n",
      "rl.yaml:6: descriptors[0].rate_limit.requests_per_unit: sliding_log keeps one");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 0\n      algorithm: gcra\n      burst: 3\n",
      "rl.yaml:8: descriptors[0].rate_limit.burst: requests_per_unit 0 admits nothing");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n"
      "      algorithm: gcra\n",
      "rl.yaml:6: descriptors[0].rate_limit.algorithm: does not apply to an unlimited");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day}\n"
      "    rate_limits: [{unit: day}]\n",
      "rl.yaml:5: descriptors[0].rate_limits: give either rate_limit or rate_limits");
  ExpectError("domain: d\ndescriptors:\n  - key: k\n    rate_limits: []\n",
              "rl.yaml:4: descriptors[0].rate_limits: expected a non-empty list");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: day}\n"
      "      - {unlimited: true}\n",
      "rl.yaml:6: descriptors[0].rate_limits[1].unlimited: an unlimited rate limit goes "
      "in rate_limit");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: day, name: a}\n"
      "      - {unit: hour, name: a}\n",
      "rl.yaml:6: descriptors[0].rate_limits[1].name: two limits of one descriptor named "
      "'a'");
  ExpectError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: day, name: a}\n"
      "      - {unit: hour, replaces: [{name: a}]}\n",
      "rl.yaml:5: descriptors[0].rate_limits[0].name: a rate limit cannot replace itself");
}

TEST(RlsConfig, NestingDepthIsBounded) {
  std::string yaml = "domain: d\ndescriptors:\n";
  std::string indent = "  ";
  for (size_t level = 0; level <= kMaxDescriptorDepth; ++level) {
    yaml += indent + "- key: k\n" + indent + "  descriptors:\n";
    indent += "    ";
  }
  ExpectError(yaml, "rl.yaml:", "nested more than 64 deep");
}

class RlsConfigDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice_rls_config_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::string Dir() const { return dir_.string(); }

  std::filesystem::path dir_;
};

TEST_F(RlsConfigDirectory, LoadsYamlFilesInNameOrder) {
  Write("b.yml", "domain: second\n");
  Write("a.yaml", "domain: first\n");
  Write(".hidden.yaml", "domain: first\n");  // a duplicate, but skipped
  Write("notes.txt", "not yaml at all: [");
  std::filesystem::create_directories(dir_ / "..data");
  auto config = LoadConfigDirectory(Dir());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->domains.size(), 2u);
  EXPECT_EQ(config->domains[0].domain, "first");
  EXPECT_EQ(config->domains[0].file, (dir_ / "a.yaml").string());
  EXPECT_EQ(config->domains[1].domain, "second");
}

TEST_F(RlsConfigDirectory, DuplicateDomainIsAnError) {
  Write("a.yaml", "domain: shared\n");
  Write("b.yaml", "domain: shared\n");
  auto config = LoadConfigDirectory(Dir());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), (dir_ / "b.yaml").string() +
                                           ": domain: duplicate domain 'shared' (also in " +
                                           (dir_ / "a.yaml").string() + ")");
}

TEST_F(RlsConfigDirectory, ErrorsNameTheFile) {
  Write("good.yaml", "domain: fine\n");
  Write("typo.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: sec}\n");
  auto config = LoadConfigDirectory(Dir());
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(config.status().message().starts_with(
      (dir_ / "typo.yaml").string() + ":4: descriptors[0].rate_limit.unit: unknown unit 'sec'"))
      << config.status().message();
}

TEST_F(RlsConfigDirectory, EmptyOrMissingDirectoryIsAnError) {
  auto empty = LoadConfigDirectory(Dir());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no *.yaml or *.yml file"), std::string::npos);
  auto missing = LoadConfigDirectory(Dir() + "/nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot read rate limit config directory"),
            std::string::npos);
  auto file = LoadConfigFiles({Dir() + "/absent.yaml"});
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("cannot open rate limit config"), std::string::npos);
}

}  // namespace
}  // namespace sluice::rls
