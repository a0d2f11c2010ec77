#include "config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "config/example_config.h"

namespace sluice::config {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ConfigTest, ParsesEveryField) {
  auto config = ParseConfig(R"(listen: 0.0.0.0:9000
store: { url: "redis://127.0.0.1:6379", timeout_ms: 20, instances: 4 }
server: { io_threads: 3, read_timeout: 2s, idle_timeout: 500ms, max_waiters: 500,
          max_waiters_per_key: 20, expose_keys: true, max_connections: 300 }
rules:
  - { name: api, algorithm: gcra, limit: 100, period: 1m, burst: 20, on_error: local_fallback,
      max_waiters: 50, max_waiters_per_key: 5 }
  - name: login.v2
    algorithm: sliding_window
    limit: 5
    period: 15m
)",
                            "sluice.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen.host, "0.0.0.0");
  EXPECT_EQ(config->listen.port, 9000);
  EXPECT_EQ(config->store.url, "redis://127.0.0.1:6379");
  EXPECT_EQ(config->store.timeout, milliseconds(20));
  EXPECT_EQ(config->store.instances, 4);
  EXPECT_EQ(config->server.io_threads, 3);
  EXPECT_EQ(config->server.read_timeout, seconds(2));
  EXPECT_EQ(config->server.idle_timeout, milliseconds(500));
  EXPECT_EQ(config->server.max_connections, 300u);
  EXPECT_EQ(config->server.max_waiters, 500u);
  EXPECT_EQ(config->server.max_waiters_per_key, 20u);
  EXPECT_TRUE(config->server.expose_keys);
  ASSERT_EQ(config->rules.size(), 2u);
  EXPECT_EQ(config->rules[0].name, "api");
  EXPECT_EQ(config->rules[0].limit, *Limit::Create(Algorithm::kGcra, 100, seconds(60), 20));
  EXPECT_EQ(config->rules[0].on_error, FailurePolicy::kLocalFallback);
  EXPECT_EQ(config->rules[1].on_error, FailurePolicy::kFailOpen);
  EXPECT_EQ(config->rules[1].name, "login.v2");
  EXPECT_EQ(config->rules[1].limit,
            *Limit::Create(Algorithm::kSlidingWindow, 5, std::chrono::minutes(15)));
  EXPECT_EQ(config->rules[0].max_waiters, 50u);
  EXPECT_EQ(config->rules[0].max_waiters_per_key, 5u);
  // A rule without bounds of its own takes the server's.
  EXPECT_EQ(config->rules[1].max_waiters, 500u);
  EXPECT_EQ(config->rules[1].max_waiters_per_key, 20u);
}

TEST(ConfigTest, OptionalSectionsHaveDefaults) {
  auto config =
      ParseConfig("rules: [{name: a, algorithm: fixed_window, limit: 1, period: 1s}]", "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen.ToString(), "127.0.0.1:8080");
  EXPECT_EQ(config->store.url, "memory://");
  EXPECT_EQ(config->store.timeout, milliseconds(50));
  EXPECT_EQ(config->store.instances, 1);
  EXPECT_EQ(config->store.max_memory, size_t{256} << 20);
  EXPECT_EQ(config->rules[0].on_error, FailurePolicy::kFailOpen);
  EXPECT_EQ(config->server.io_threads, 0);
  EXPECT_EQ(config->server.read_timeout, seconds(10));
  EXPECT_EQ(config->server.idle_timeout, seconds(60));
  EXPECT_EQ(config->server.max_connections, std::nullopt);  // from the fd limit, at start
  EXPECT_EQ(config->server.max_waiters, 100'000u);
  EXPECT_EQ(config->server.max_waiters_per_key, 1'000u);
  EXPECT_FALSE(config->server.expose_keys);
  EXPECT_EQ(config->rules[0].max_waiters, 100'000u);
  EXPECT_EQ(config->rules[0].max_waiters_per_key, 1'000u);
  EXPECT_TRUE(config->rls.config_dir.empty());
}

TEST(ConfigTest, RateLimitServiceSection) {
  auto config = ParseConfig(
      "rls: {config_dir: /etc/ratelimit, grpc_listen: \"127.0.0.1:8081\", shadow_mode: true,\n"
      "      quota_mode: true, x_ratelimit_headers: true, on_error: error, watch: false}\n"
      "rules: [{name: a, algorithm: fixed_window, limit: 1, period: 1s}]",
      "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->rls.config_dir, "/etc/ratelimit");
  ASSERT_TRUE(config->rls.grpc_listen.has_value());
  EXPECT_EQ(config->rls.grpc_listen->ToString(), "127.0.0.1:8081");
  EXPECT_TRUE(config->rls.shadow_mode);
  EXPECT_TRUE(config->rls.quota_mode);
  EXPECT_TRUE(config->rls.x_ratelimit_headers);
  EXPECT_FALSE(config->rls.on_error.has_value());
  EXPECT_FALSE(config->rls.watch);

  config = ParseConfig(
      "rls: {config_dir: d}\nrules: [{name: a, algorithm: fixed_window, limit: 1, period: 1s}]",
      "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->rls.grpc_listen.has_value());
  EXPECT_FALSE(config->rls.quota_mode);
  EXPECT_EQ(config->rls.on_error, FailurePolicy::kFailOpen);
  EXPECT_TRUE(config->rls.watch);
}

// A replacement for envoyproxy/ratelimit has no sluice rules to write: with an rls section, the
// rules may be left out or empty.
TEST(ConfigTest, RlsSectionNeedsNoRules) {
  for (const char* text :
       {"rls: {config_dir: /etc/ratelimit}\n", "rls: {config_dir: /etc/ratelimit}\nrules: []\n"}) {
    auto config = ParseConfig(text, "x.yaml");
    ASSERT_TRUE(config.ok()) << text << config.status().ToString();
    EXPECT_TRUE(config->rules.empty());
    EXPECT_EQ(config->rls.config_dir, "/etc/ratelimit");
  }
}

// store.max_memory: bytes, or a whole number of binary units.
// A rule's shadow_mode is its own, or else the server's.
TEST(ConfigTest, ShadowModeIsPerRuleWithTheServersAsDefault) {
  constexpr std::string_view kRules = R"(
rules:
  - { name: a, algorithm: fixed_window, limit: 1, period: 1s }
  - { name: b, algorithm: fixed_window, limit: 1, period: 1s, shadow_mode: true }
  - { name: c, algorithm: fixed_window, limit: 1, period: 1s, shadow_mode: false }
)";
  for (bool server : {false, true}) {
    auto config = ParseConfig(std::string("server: { shadow_mode: ") + (server ? "true" : "false") +
                                  " }" + std::string(kRules),
                              "x.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->server.shadow_mode, server);
    EXPECT_EQ(config->rules[0].shadow_mode, server);
    EXPECT_TRUE(config->rules[1].shadow_mode);
    EXPECT_FALSE(config->rules[2].shadow_mode);
  }
  auto bad = ParseConfig(
      "rules:\n  - { name: a, algorithm: gcra, limit: 1, period: 1s, shadow_mode: maybe }\n",
      "bad.yaml");
  EXPECT_EQ(bad.status().message(), "bad.yaml:2: rules[0].shadow_mode: expected true or false");
}

// A rule's lease: off unless given; its lifetime 100ms unless given.
TEST(ConfigTest, LeaseTermsArePerRuleWithADefaultLifetime) {
  auto config = ParseConfig(R"(rules:
  - { name: none, algorithm: gcra, limit: 100, period: 1m }
  - { name: meter, algorithm: gcra, limit: 100, period: 1m, burst: 20, lease: { units: 20 } }
  - name: window
    algorithm: fixed_window
    limit: 1000
    period: 1s
    shadow_mode: true
    lease:
      units: 50
      lifetime: 2s
  - { name: longest, algorithm: token_bucket, limit: 5, period: 1s, lease: {units: 1, lifetime: 1m} }
)",
                            "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->rules.size(), 4u);
  EXPECT_EQ(config->rules[0].lease, LeaseTerms{});
  EXPECT_EQ(config->rules[1].lease, (LeaseTerms{.units = 20, .lifetime = milliseconds(100)}));
  EXPECT_EQ(config->rules[2].lease, (LeaseTerms{.units = 50, .lifetime = seconds(2)}));
  EXPECT_TRUE(config->rules[2].shadow_mode);
  EXPECT_EQ(config->rules[3].lease, (LeaseTerms{.units = 1, .lifetime = std::chrono::minutes(1)}));
}

TEST(ConfigTest, MaxMemoryTakesBytesOrBinaryUnits) {
  const std::pair<std::string_view, size_t> cases[] = {
      {"1048576", size_t{1} << 20}, {"2048KiB", size_t{2} << 20}, {"16MiB", size_t{16} << 20},
      {"3GiB", size_t{3} << 30},    {"1TiB", size_t{1} << 40},
  };
  for (const auto& [text, bytes] : cases) {
    auto config = ParseConfig("store: {max_memory: " + std::string(text) +
                                  "}\nrules: [{name: a, algorithm: gcra, limit: 1, period: 1s}]",
                              "x.yaml");
    ASSERT_TRUE(config.ok()) << text << ": " << config.status().ToString();
    EXPECT_EQ(config->store.max_memory, bytes) << text;
  }
}

TEST(ConfigTest, TheShippedExampleIsValidAndBuiltIn) {
  const std::string path = SLUICE_SOURCE_DIR "/examples/sluice.yaml";
  auto config = LoadConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen.ToString(), "127.0.0.1:8080");
  EXPECT_EQ(config->store.url, "memory://");
  EXPECT_GE(config->rules.size(), 1u);

  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kExampleConfig, file);
  auto built_in = ParseConfig(kExampleConfig, kExampleConfigName);
  ASSERT_TRUE(built_in.ok()) << built_in.status().ToString();
  EXPECT_EQ(built_in->listen.ToString(), "127.0.0.1:8080");
  EXPECT_EQ(built_in->rules.size(), config->rules.size());
}

struct BadConfig {
  std::string yaml;
  std::string error;  // the whole message
};

constexpr std::string_view kRuleHead = "rules:\n  - name: api\n";  // lines 1 and 2

TEST(ConfigTest, EachMistakeIsReportedWithFileLineAndField) {
  const std::string rule = std::string(kRuleHead);
  const std::vector<BadConfig> cases = {
      {rule + "    algorithm: gcr\n    limit: 10\n    period: 1s\n",
       "bad.yaml:3: rules[0].algorithm: unknown algorithm 'gcr' (expected fixed_window, "
       "sliding_log, sliding_window, token_bucket, leaky_bucket or gcra)"},
      {rule + "    algorithm: gcra\n    limit: 10\n",
       "bad.yaml:2: rules[0].period: missing required field"},
      {rule + "    algorithm: gcra\n    limit: ten\n    period: 1s\n",
       "bad.yaml:4: rules[0].limit: expected an integer, got 'ten'"},
      {rule + "    algorithm: gcra\n    limit: 1.5\n    period: 1s\n",
       "bad.yaml:4: rules[0].limit: expected an integer, got '1.5'"},
      {rule + "    algorithm: gcra\n    limit: [10]\n    period: 1s\n",
       "bad.yaml:4: rules[0].limit: expected an integer"},
      {rule + "    algorithm: [gcra]\n    limit: 10\n    period: 1s\n",
       "bad.yaml:3: rules[0].algorithm: expected a string"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1x\n",
       "bad.yaml:5: rules[0].period: bad duration '1x': unknown unit 'x' (us, ms, s, m, h or d)"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 10\n",
       "bad.yaml:5: rules[0].period: bad duration '10': missing unit (us, ms, s, m, h or d)"},
      {rule + "    algorithm: gcra\n    limit: 0\n    period: 1s\n",
       "bad.yaml:4: rules[0].limit: limit must be positive, got 0"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 0s\n",
       "bad.yaml:5: rules[0].period: period must be between 1ms and 366 days, got 0us"},
      {rule + "    algorithm: fixed_window\n    limit: 10\n    period: 1s\n    burst: 5\n",
       "bad.yaml:6: rules[0].burst: burst applies to token_bucket, leaky_bucket and gcra, not "
       "fixed_window"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    burst: -1\n",
       "bad.yaml:6: rules[0].burst: burst must be positive, got -1"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    brust: 5\n",
       "bad.yaml:6: rules[0].brust: unknown field (expected name, algorithm, limit, period, "
       "burst, on_error, max_waiters, max_waiters_per_key, key, deny_status, "
       "shadow_mode, lease)"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    max_waiters_per_key: many\n",
       "bad.yaml:6: rules[0].max_waiters_per_key: expected an integer, got 'many'"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    max_waiters: 10000001\n",
       "bad.yaml:6: rules[0].max_waiters: must be between 1 and 10000000"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    max_waiters_per_key: 0\n",
       "bad.yaml:6: rules[0].max_waiters_per_key: must be between 1 and 10000000"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    on_error: fail_slowly\n",
       "bad.yaml:6: rules[0].on_error: unknown failure policy 'fail_slowly' (expected fail_open, "
       "fail_closed or local_fallback)"},
      {rule +
           "    algorithm: sliding_window\n    limit: 10\n    period: 1s\n    lease: {units: 2}\n",
       "bad.yaml:6: rules[0].lease: leases apply to fixed_window, token_bucket, leaky_bucket and "
       "gcra, not sliding_window: a sliding window weighs each unit by when it was admitted"},
      {rule + "    algorithm: sliding_log\n    limit: 10\n    period: 1s\n    lease: {units: 2}\n",
       "bad.yaml:6: rules[0].lease: leases apply to fixed_window, token_bucket, leaky_bucket and "
       "gcra, not sliding_log: a sliding window weighs each unit by when it was admitted"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    lease: {units: 0}\n",
       "bad.yaml:6: rules[0].lease.units: must be at least 1, got 0"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    lease: {units: -3}\n",
       "bad.yaml:6: rules[0].lease.units: must be at least 1, got -3"},
      {rule +
           "    algorithm: fixed_window\n    limit: 10\n    period: 1s\n    lease: {units: 11}\n",
       "bad.yaml:6: rules[0].lease.units: lease units must be between 1 and the capacity 10, got "
       "11"},
      {rule + "    algorithm: gcra\n    limit: 100\n    period: 1s\n    burst: 5\n"
              "    lease: {units: 6}\n",
       "bad.yaml:7: rules[0].lease.units: lease units must be between 1 and the capacity 5, got 6"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    lease: {units: many}\n",
       "bad.yaml:6: rules[0].lease.units: expected an integer, got 'many'"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n"
              "    lease: {units: 2, lifetime: 500us}\n",
       "bad.yaml:6: rules[0].lease.lifetime: lease lifetime must be between 1ms and 60000ms, got "
       "500us"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n"
              "    lease: {units: 2, lifetime: 61s}\n",
       "bad.yaml:6: rules[0].lease.lifetime: lease lifetime must be between 1ms and 60000ms, got "
       "61000000us"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n"
              "    lease: {units: 2, lifetime: soon}\n",
       "bad.yaml:6: rules[0].lease.lifetime: bad duration 'soon': expected a whole number and a "
       "unit"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n"
              "    lease: {units: 2, life: 1s}\n",
       "bad.yaml:6: rules[0].lease.life: unknown field (expected units, lifetime)"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    lease: {lifetime: 1s}\n",
       "bad.yaml:6: rules[0].lease.units: missing required field"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n    lease: 5\n",
       "bad.yaml:6: rules[0].lease: expected a mapping of fields"},
      {rule + "    algorithm: gcra\n    limit: 10\n    limit: 20\n    period: 1s\n",
       "bad.yaml:5: rules[0].limit: field given twice"},
      {rule + "    algorithm: gcra\n    limit: 10\n    period: 1s\n"
              "  - { name: api, algorithm: gcra, limit: 1, period: 1s }\n",
       "bad.yaml:6: rules[1].name: duplicate rule name 'api'"},
      {"rules:\n  - { name: a b, algorithm: gcra, limit: 1, period: 1s }\n",
       "bad.yaml:2: rules[0].name: 'a b' is not a rule name: 1 to 64 characters of A-Z, a-z, "
       "0-9, '_', '.', ':' or '-'"},
      {"rules:\n  - 42\n", "bad.yaml:2: rules[0]: expected a mapping of fields"},
      {"listen: 127.0.0.1:8080\n", "bad.yaml:1: rules: missing required field"},
      {"rules: []\n", "bad.yaml:1: rules: expected a non-empty list of rules, or an rls section"},
      {"rules: {a: 1}\n",
       "bad.yaml:1: rules: expected a non-empty list of rules, or an rls section"},
      {"rls: {config_dir: d}\nrules: {a: 1}\n", "bad.yaml:2: rules: expected a list of rules"},
      {"lissen: 127.0.0.1:80\n",
       "bad.yaml:1: lissen: unknown field (expected listen, max_sliding_log_limit, store, server, "
       "forward_auth, rules, rls)"},
      {"rls: {grpc_listen: \"127.0.0.1:8081\"}\n",
       "bad.yaml:1: rls.config_dir: missing required field"},
      {"rls: {config_dir: d, grpc_listen: nowhere}\n",
       "bad.yaml:1: rls.grpc_listen: bad listen address 'nowhere': expected HOST:PORT"},
      {"rls: {config_dir: d, on_error: shrug}\n",
       "bad.yaml:1: rls.on_error: unknown failure policy 'shrug' (expected fail_open, fail_closed "
       "or local_fallback) (or error)"},
      {"rls: {config_dir: d, shadow: true}\n",
       "bad.yaml:1: rls.shadow: unknown field (expected config_dir, grpc_listen, tls, "
       "shadow_mode, quota_mode, x_ratelimit_headers, on_error, watch)"},
      {"rls: {config_dir: d, watch: often}\n", "bad.yaml:1: rls.watch: expected true or false"},
      {"listen: localhost\nrules: []\n",
       "bad.yaml:1: listen: bad listen address 'localhost': expected HOST:PORT"},
      {"store: {url: memory://, timeout_ms: 0}\n",
       "bad.yaml:1: store.timeout_ms: must be between 1 and 5000"},
      {"store: {url: memory://, timeout_ms: 5001}\n",
       "bad.yaml:1: store.timeout_ms: must be between 1 and 5000"},
      {"store: memory://\n", "bad.yaml:1: store: expected a mapping of fields"},
      {"store: {url: memory://, instances: 0}\n",
       "bad.yaml:1: store.instances: must be between 1 and 1000000"},
      {"store: {max_memory: 256MB}\n",
       "bad.yaml:1: store.max_memory: bad size '256MB': not a whole number with a unit (expected "
       "bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"store: {max_memory: 1.5GiB}\n",
       "bad.yaml:1: store.max_memory: bad size '1.5GiB': not a whole number with a unit (expected "
       "bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"store: {max_memory: -1}\n",
       "bad.yaml:1: store.max_memory: bad size '-1': not a whole number with a unit (expected "
       "bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"store: {max_memory: 512KiB}\n",
       "bad.yaml:1: store.max_memory: bad size '512KiB': must be between 1MiB and 1TiB (expected "
       "bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"store: {max_memory: 2TiB}\n",
       "bad.yaml:1: store.max_memory: bad size '2TiB': must be between 1MiB and 1TiB (expected "
       "bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"store: {max_memory: 99999999999999999999GiB}\n",
       "bad.yaml:1: store.max_memory: bad size '99999999999999999999GiB': not a whole number with "
       "a unit (expected bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"store: {max_memory: [1]}\n",
       "bad.yaml:1: store.max_memory: bad size '': not a single value (expected bytes, or a whole "
       "number of KiB, MiB, GiB or TiB, e.g. 256MiB)"},
      {"server:\n  io_threads: 0\n", "bad.yaml:2: server.io_threads: must be between 1 and 256"},
      {"server:\n  max_waiters: -5\n",
       "bad.yaml:2: server.max_waiters: must be between 1 and 10000000"},
      {"server:\n  max_waiters_per_key: [1]\n",
       "bad.yaml:2: server.max_waiters_per_key: expected an integer"},
      {"server:\n  waiters: 1\n",
       "bad.yaml:2: server.waiters: unknown field (expected io_threads, read_timeout, "
       "idle_timeout, max_connections, max_waiters, max_waiters_per_key, expose_keys, "
       "shadow_mode, auth, admin_listen, tls)"},
      {"server:\n  shadow_mode: 1\n", "bad.yaml:2: server.shadow_mode: expected true or false"},
      {"server:\n  tls: {key_file: tls.key}\n",
       "bad.yaml:2: server.tls.cert_file: missing required field"},
      {"server:\n  tls: {cert_file: /nonexistent/tls.crt, key_file: /nonexistent/tls.key}\n",
       "bad.yaml:2: server.tls.cert_file: cannot use '/nonexistent/tls.crt': cannot open it"},
      {"server:\n  tls: {cert_file: a, key_file: b, ca_file: c}\n",
       "bad.yaml:2: server.tls.ca_file: unknown field (expected cert_file, key_file, "
       "client_ca_file)"},
      {"server:\n  max_connections: 0\n",
       "bad.yaml:2: server.max_connections: must be between 1 and 1000000"},
      {"server:\n  max_connections: 1000001\n",
       "bad.yaml:2: server.max_connections: must be between 1 and 1000000"},
      {"server:\n  max_connections: lots\n",
       "bad.yaml:2: server.max_connections: expected an integer, got 'lots'"},
      {"server:\n  expose_keys: yes\n", "bad.yaml:2: server.expose_keys: expected true or false"},
      {"server:\n  read_timeout: soon\n",
       "bad.yaml:2: server.read_timeout: bad duration 'soon': expected a whole number and a "
       "unit"},
      {"rules:\n  - { name: a, algorithm: gcra\n",
       "bad.yaml:3: (syntax): end of map flow not found"},
      {"", "bad.yaml:1: (top level): the file is empty"},
      {"- a\n- b\n", "bad.yaml:1: (top level): expected a mapping of fields"},
  };
  for (const BadConfig& c : cases) {
    auto config = ParseConfig(c.yaml, "bad.yaml");
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(config.status().message(), c.error) << c.yaml;
  }
}

TEST(ConfigTest, ForwardAuthKeysAndTrustedProxies) {
  auto config = ParseConfig(R"(forward_auth:
  trusted_proxies: [10.0.0.0/8, "::1"]
  client_prefixes: {ipv4: 24, ipv6: 56}
rules:
  - {name: ip, algorithm: gcra, limit: 1, period: 1s, key: forwarded_for, deny_status: 403}
  - {name: real, algorithm: gcra, limit: 1, period: 1s, key: [real_ip]}
  - {name: all, algorithm: gcra, limit: 1, period: 1s,
     key: [{header: X-Api-Key}, method, uri, forwarded_for]}
  - {name: plain, algorithm: gcra, limit: 1, period: 1s}
)",
                            "auth.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  using Source = KeyPart::Source;
  const auto sources = [](const Rule& rule) {
    std::vector<Source> parts;
    for (const KeyPart& part : rule.auth.key) parts.push_back(part.source);
    return parts;
  };
  EXPECT_EQ(sources(config->rules[0]), std::vector{Source::kForwardedFor});
  EXPECT_EQ(config->rules[0].auth.deny_status, 403);
  EXPECT_TRUE(config->rules[0].auth.trusted_proxies.Contains("10.1.2.3"));
  EXPECT_TRUE(config->rules[0].auth.trusted_proxies.Contains("::1"));
  EXPECT_FALSE(config->rules[0].auth.trusted_proxies.Contains("192.0.2.1"));
  EXPECT_EQ(config->rules[0].auth.client_prefixes.ipv4(), 24);
  EXPECT_EQ(config->rules[0].auth.client_prefixes.ipv6(), 56);
  EXPECT_EQ(sources(config->rules[1]), std::vector{Source::kRealIp});
  EXPECT_EQ(config->rules[1].auth.deny_status, 429);
  EXPECT_EQ(sources(config->rules[2]),
            (std::vector{Source::kHeader, Source::kMethod, Source::kUri, Source::kForwardedFor}));
  EXPECT_EQ(config->rules[2].auth.key[0].header, "X-Api-Key");
  EXPECT_TRUE(config->rules[3].auth.key.empty());
  // Without the section: no proxy trusted, /32 and /64.
  auto plain = ParseConfig(
      "rules:\n  - {name: k, algorithm: gcra, limit: 1, period: 1s, "
      "key: {header: X-Tenant}}\n",
      "plain.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->rules[0].auth.trusted_proxies.Contains("127.0.0.1"));
  EXPECT_EQ(plain->rules[0].auth.client_prefixes.ipv6(), 64);
}

TEST(ConfigTest, ForwardAuthMistakesAreReportedWithFileLineAndField) {
  const std::string rule = "rules:\n  - {name: a, algorithm: gcra, limit: 1, period: 1s, ";
  const std::string trusted = "forward_auth: {trusted_proxies: [127.0.0.1]}\n";
  const std::vector<BadConfig> cases = {
      {rule + "key: client}\n",
       "bad.yaml:2: rules[0].key: expected forwarded_for, real_ip, method, uri or {header: NAME}, "
       "got 'client'"},
      {rule + "key: [uri, [method]]}\n",
       "bad.yaml:2: rules[0].key[1]: expected forwarded_for, real_ip, method, uri or {header: "
       "NAME}, got 'a list'"},
      {rule + "key: []}\n", "bad.yaml:2: rules[0].key: must not be empty"},
      {rule + "key: {header: \"X Api\"}}\n",
       "bad.yaml:2: rules[0].key.header: 'X Api' is not a header name"},
      {rule + "key: {heder: X-Api-Key}}\n",
       "bad.yaml:2: rules[0].key.heder: unknown field (expected header)"},
      {rule + "key: [uri, forwarded_for]}\n",
       "bad.yaml:2: rules[0].key[1]: a client address needs forward_auth.trusted_proxies: the "
       "addresses of the proxies whose headers are believed"},
      {trusted + rule + "key: real_ip, deny_status: 401}\n",
       "bad.yaml:3: rules[0].deny_status: must be 429 or 403"},
      {rule + "deny_status: 403}\n",
       "bad.yaml:2: rules[0].deny_status: is for forward auth (/v1/auth): give the rule a key"},
      {"forward_auth: {trusted_proxies: [10.0.0.0/33]}\n" + rule + "key: uri}\n",
       "bad.yaml:1: forward_auth.trusted_proxies: bad trusted proxy '10.0.0.0/33': expected an "
       "address or a CIDR block like 10.0.0.0/8"},
      {"forward_auth: {trusted_proxies: 10.0.0.0/8}\n" + rule + "key: uri}\n",
       "bad.yaml:1: forward_auth.trusted_proxies: expected a list of addresses"},
      {"forward_auth: {client_prefixes: {ipv6: 129}}\n" + rule + "key: uri}\n",
       "bad.yaml:1: forward_auth.client_prefixes: client prefixes go from /0 to /32 (IPv4) and "
       "/128 (IPv6), got /32 and /129"},
      {"forward_auth: {trusted: []}\n" + rule + "key: uri}\n",
       "bad.yaml:1: forward_auth.trusted: unknown field (expected trusted_proxies, "
       "client_prefixes)"},
  };
  for (const BadConfig& c : cases) {
    auto config = ParseConfig(c.yaml, "bad.yaml");
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_EQ(config.status().message(), c.error) << c.yaml;
  }
}

TEST(ConfigTest, TheProxyExamplesAreValid) {
  for (const char* proxy : {"nginx", "traefik", "caddy"}) {
    auto config =
        LoadConfigFile(std::string(SLUICE_SOURCE_DIR "/examples/") + proxy + "/sluice.yaml");
    ASSERT_TRUE(config.ok()) << proxy << ": " << config.status().ToString();
    for (const Rule& rule : config->rules) EXPECT_FALSE(rule.auth.key.empty()) << rule.name;
  }
}

// sliding_log keeps one entry per admission, so its memory per key grows with the limit: a rule
// above max_sliding_log_limit (10000 unless the config raises it, to at most
// Limit::kMaxSlidingLogCount) is refused, pointing to sliding_window.
TEST(ConfigTest, SlidingLogLimitsAboveTheMaximumAreRefused) {
  const auto rule = [](std::string_view algorithm, int64_t limit) {
    return "rules:\n  - { name: log, algorithm: " + std::string(algorithm) +
           ", limit: " + std::to_string(limit) + ", period: 1h }\n";
  };
  auto config = ParseConfig(rule("sliding_log", 10'000), "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->max_sliding_log_limit, 10'000);

  config = ParseConfig(rule("sliding_log", 10'001), "x.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "x.yaml:2: rules[0].limit: sliding_log keeps one entry per admitted request (about "
            "100 bytes each in Redis); limit 10001 is above max_sliding_log_limit 10000: use "
            "sliding_window, or raise max_sliding_log_limit (at most 100000)");

  config = ParseConfig("max_sliding_log_limit: 100000\n" + rule("sliding_log", 100'000), "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->max_sliding_log_limit, 100'000);
  EXPECT_EQ(config->rules[0].limit.count(), 100'000);

  config = ParseConfig("max_sliding_log_limit: 50\n" + rule("sliding_log", 51), "x.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("limit 51 is above max_sliding_log_limit 50"),
            std::string::npos)
      << config.status().message();

  config = ParseConfig("max_sliding_log_limit: 100001\n" + rule("sliding_log", 5), "x.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "x.yaml:1: max_sliding_log_limit: must be between 1 and 100000");

  // The other algorithms keep O(1) state at any limit.
  config = ParseConfig(rule("sliding_window", 1'000'000), "x.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
}

TEST(ConfigTest, KeyPrefixAndAPasswordKeptOutOfTheConfig) {
  auto defaults = ParseConfig("rules: [{name: a, algorithm: gcra, limit: 1, period: 1s}]\n", "x");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->store.key_prefix, "sluice");
  EXPECT_EQ(defaults->store.password, "");

  const std::string path = ::testing::TempDir() + "sluice_config_test_password";
  std::ofstream(path) << "s3cr:et\n";
  const std::string rules = "rules: [{name: a, algorithm: gcra, limit: 1, period: 1s}]\n";
  auto from_file = ParseConfig(
      "store:\n  url: redis://sluice@cache:6379\n  key_prefix: billing-v2.eu\n"
      "  password_file: " +
          path + "\n" + rules,
      "x");
  std::remove(path.c_str());
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->store.key_prefix, "billing-v2.eu");
  EXPECT_EQ(from_file->store.password, "s3cr:et");

  ::setenv("SLUICE_CONFIG_TEST_PASSWORD", "from the environment", 1);
  auto from_env = ParseConfig(
      "store: {url: redis://cache:6379, password_env: SLUICE_CONFIG_TEST_PASSWORD}\n" + rules, "x");
  ::unsetenv("SLUICE_CONFIG_TEST_PASSWORD");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(from_env->store.password, "from the environment");
}

// A bad key prefix or a password that cannot be had is refused with file, line and field, and no
// error shows a password.
TEST(ConfigTest, KeyPrefixAndPasswordMistakesAreReportedWithFileLineAndField) {
  const std::string dir = ::testing::TempDir();
  const std::string empty = dir + "sluice_config_test_empty_password";
  std::ofstream(empty) << "\n";
  const std::string two_lines = dir + "sluice_config_test_two_line_password";
  std::ofstream(two_lines) << "hunter2\nhunter3\n";
  const std::string secret = dir + "sluice_config_test_secret";
  std::ofstream(secret) << "hunter2\n";
  ::setenv("SLUICE_CONFIG_TEST_EMPTY", "", 1);
  ::unsetenv("SLUICE_CONFIG_TEST_UNSET");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"store:\n  key_prefix: app{1}\n",
       "bad.yaml:2: store.key_prefix: bad key prefix 'app{1}': must not contain '{' or '}' (a "
       "key's Redis Cluster hash tag is the limiter key's own)"},
      {"store:\n  key_prefix: '}'\n",
       "bad.yaml:2: store.key_prefix: bad key prefix '}': must not contain '{' or '}' (a key's "
       "Redis Cluster hash tag is the limiter key's own)"},
      {"store:\n  key_prefix: 'app*'\n",
       "bad.yaml:2: store.key_prefix: bad key prefix 'app*': expected 1 to 64 letters, digits, "
       "'_', '.', ':' or '-' (it is also the Redis ACL's key pattern)"},
      {"store:\n  key_prefix: ''\n",
       "bad.yaml:2: store.key_prefix: bad key prefix '': expected 1 to 64 letters, digits, '_', "
       "'.', ':' or '-' (it is also the Redis ACL's key pattern)"},
      {"store:\n  key_prefix: [a]\n", "bad.yaml:2: store.key_prefix: expected a string"},
      {"store:\n  url: redis://h:1\n  password_file: /nonexistent/redis-password\n",
       "bad.yaml:3: store.password_file: cannot open '/nonexistent/redis-password': No such file "
       "or directory"},
      {"store:\n  password_file: " + dir + "\n",
       "bad.yaml:2: store.password_file: cannot read '" + dir + "'"},
      {"store:\n  password_file: " + empty + "\n",
       "bad.yaml:2: store.password_file: '" + empty + "' is empty"},
      {"store:\n  password_file: " + two_lines + "\n",
       "bad.yaml:2: store.password_file: '" + two_lines + "' holds more than one line"},
      {"store:\n  password_env: SLUICE_CONFIG_TEST_UNSET\n",
       "bad.yaml:2: store.password_env: the environment variable 'SLUICE_CONFIG_TEST_UNSET' is "
       "not set or is empty"},
      {"store:\n  password_env: SLUICE_CONFIG_TEST_EMPTY\n",
       "bad.yaml:2: store.password_env: the environment variable 'SLUICE_CONFIG_TEST_EMPTY' is "
       "not set or is empty"},
      {"store:\n  password_file: " + secret + "\n  password_env: SLUICE_CONFIG_TEST_EMPTY\n",
       "bad.yaml:3: store.password_env: give the password in one place: password_file or "
       "password_env"},
      {"store:\n  url: redis://sluice:hunter2@h:1\n  password_file: " + secret + "\n",
       "bad.yaml:3: store.password_file: the store URL holds a password too: give it in one "
       "place (the URL may name the user alone, redis://user@host:port)"},
      {"store:\n  pasword_file: x\n",
       "bad.yaml:2: store.pasword_file: unknown field (expected url, timeout_ms, instances, "
       "max_memory, key_prefix, password_file, password_env, sentinel_user, "
       "sentinel_password_file, sentinel_password_env, tls)"},
  };
  for (const auto& [yaml, error] : cases) {
    auto config = ParseConfig(yaml + "rules: [{name: a, algorithm: gcra, limit: 1, period: 1s}]\n",
                              "bad.yaml");
    ASSERT_FALSE(config.ok()) << yaml;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(config.status().message(), error) << yaml;
    EXPECT_EQ(config.status().message().find("hunter2"), std::string::npos);
  }
  ::unsetenv("SLUICE_CONFIG_TEST_EMPTY");
  for (const std::string& file : {empty, two_lines, secret}) std::remove(file.c_str());
}

TEST(ConfigTest, EveryNameFollowsOneRule) {
  const std::string rules = "rules:\n  - {name: api, algorithm: gcra, limit: 1, period: 1s}\n";
  const std::string hash(64, 'a');
  const auto error = [](const std::string& yaml) {
    return ParseConfig(yaml, "n.yaml").status().message();
  };
  EXPECT_EQ(error(rules + "server:\n  auth:\n    callers:\n      - {name: a b, token_sha256: " +
                  hash + ", scopes: [check]}\n"),
            "n.yaml:6: server.auth.callers[0].name: 'a b' is not a caller name: 1 to 64 "
            "characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'");
  EXPECT_EQ(error(rules + "server:\n  auth:\n    callers:\n      - {name: a, token_sha256: " +
                  hash + ", scopes: [check, \"a/b\"]}\n"),
            "n.yaml:6: server.auth.callers[0].scopes[1]: 'a/b' is not a name: 1 to 64 "
            "characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'");
  EXPECT_EQ(error("rules:\n  - {name: " + std::string(65, 'r') +
                  ", algorithm: gcra, limit: 1, period: 1s}\n"),
            "n.yaml:2: rules[0].name: '" + std::string(65, 'r') +
                "' is not a rule name: 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'");
}

// store.tls: the TLS files of a rediss:// store, read as the store will; a file missing or not
// what it should be, or TLS options for a plain URL, refused with file, line and field.
TEST(ConfigTest, StoreTlsFilesAreCheckedWithFileLineAndField) {
  const std::string dir = ::testing::TempDir();
  const std::string not_pem = dir + "sluice_config_test_not_a_certificate";
  std::ofstream(not_pem) << "not a certificate\n";
  const std::string rules = "rules: [{name: a, algorithm: gcra, limit: 1, period: 1s}]\n";
  auto good = ParseConfig(
      "store:\n  url: rediss://cache:6380\n  tls: {server_name: cache.example}\n" + rules, "x");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->store.tls.server_name, "cache.example");
  EXPECT_FALSE(good->store.tls.insecure_skip_verify);

  const std::pair<std::string, std::string> cases[] = {
      {"store:\n  url: rediss://h:1\n  tls:\n    ca_file: /nonexistent/ca.pem\n",
       "bad.yaml:4: store.tls.ca_file: cannot read '/nonexistent/ca.pem': No such file or "
       "directory"},
      {"store:\n  url: rediss://h:1\n  tls:\n    cert_file: /nonexistent/c.pem\n",
       "bad.yaml:4: store.tls.cert_file: cannot read '/nonexistent/c.pem': No such file or "
       "directory"},
      {"store:\n  url: rediss://h:1\n  tls:\n    ca_file: " + not_pem + "\n",
       "bad.yaml:4: store.tls.ca_file: cannot use ca_file '" + not_pem + "': "},
      {"store:\n  url: redis://h:1\n  tls: {server_name: h}\n",
       "bad.yaml:3: store.tls: the store URL is not one over TLS: use rediss://, "
       "rediss+cluster:// or rediss+sentinel://"},
      {"store:\n  url: rediss://h:1\n  tls: {insecure: true}\n",
       "bad.yaml:3: store.tls.insecure: unknown field (expected ca_file, cert_file, key_file, "
       "server_name, insecure_skip_verify)"},
  };
  for (const auto& [yaml, error] : cases) {
    auto config = ParseConfig(yaml + rules, "bad.yaml");
    ASSERT_FALSE(config.ok()) << yaml;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(config.status().message().starts_with(error)) << config.status().message();
  }
  std::remove(not_pem.c_str());
}

TEST(ConfigTest, UnreadableFileIsNamed) {
  auto config = LoadConfigFile("/nonexistent/sluice.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "cannot open config file '/nonexistent/sluice.yaml': No such file or directory");
}

TEST(ConfigTest, LoadedFileErrorsNameThePath) {
  const std::string path = ::testing::TempDir() + "sluice_config_test.yaml";
  std::ofstream(path) << "rules:\n  - { name: a, algorithm: gcra, limit: -3, period: 1s }\n";
  auto config = LoadConfigFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), path + ":2: rules[0].limit: limit must be positive, got -3");
}

TEST(ConfigTest, ListenAddresses) {
  EXPECT_EQ(ParseListenAddress("127.0.0.1:0")->port, 0);
  EXPECT_EQ(ParseListenAddress("localhost:80")->host, "localhost");
  EXPECT_EQ(ParseListenAddress("[::1]:8080")->host, "::1");
  EXPECT_EQ(ParseListenAddress("[::1]:8080")->ToString(), "[::1]:8080");
  for (std::string_view bad : {"", "host", ":80", "h:", "h:-1", "h:65536", "h:8o", "::1:80"}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace sluice::config
