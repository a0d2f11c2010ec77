// The store URL checked as the config is read, and the sentinels' login of a
// redis+sentinel:// store: each mistake refused with file, line and field, no password shown.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace sluice::config {
namespace {

const std::string kRules = "rules: [{name: a, algorithm: gcra, limit: 1, period: 1s}]\n";

TEST(StoreUrlConfigTest, ReadsTheSentinelsPasswordFromAFileOrTheEnvironment) {
  const std::string secret = ::testing::TempDir() + "sluice_store_url_test_sentinel_secret";
  std::ofstream(secret) << "s3ntinel\n";
  auto from_file = ParseConfig(
      "store:\n  url: redis+sentinel://:m@10.0.0.1:26379,10.0.0.2:26379/billing\n"
      "  sentinel_password_file: " +
          secret + "\n" + kRules,
      "x");
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->store.sentinel_password, "s3ntinel");
  EXPECT_EQ(from_file->store.password, "");

  ::setenv("SLUICE_STORE_URL_TEST_SENTINEL", "from the environment", 1);
  auto from_env = ParseConfig(
      "store: {url: 'redis+sentinel://h1,h2/m', sentinel_password_env: "
      "SLUICE_STORE_URL_TEST_SENTINEL}\n" +
          kRules,
      "x");
  ::unsetenv("SLUICE_STORE_URL_TEST_SENTINEL");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(from_env->store.sentinel_password, "from the environment");

  auto with_user = ParseConfig(
      "store:\n  url: rediss+sentinel://h1,h2/m\n  sentinel_user: sluice-sentinel\n"
      "  sentinel_password_file: " +
          secret + "\n" + kRules,
      "x");
  ASSERT_TRUE(with_user.ok()) << with_user.status().ToString();
  EXPECT_EQ(with_user->store.sentinel_user, "sluice-sentinel");
  EXPECT_EQ(with_user->store.sentinel_password, "s3ntinel");
}

TEST(StoreUrlConfigTest, BadStoreUrlsAreRefusedWithFileLineAndField) {
  ::setenv("SLUICE_STORE_URL_TEST_SET", "hunter3", 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"store:\n  url: redis+sentinel://:hunter2@h1:26379,h2:26379\n",
       "bad.yaml:2: store.url: bad Redis URL 'redis+sentinel://:***@h1:26379,h2:26379': missing "
       "the master's name after the sentinels (expected "
       "redis+sentinel://[user:password@]host:port,host:port,.../master_name)"},
      {"store:\n  url: redis+sentinal://h1/m\n",
       "bad.yaml:2: store.url: unknown store URL 'redis+sentinal://h1/m' (expected memory://, "
       "redis://host:port, rediss://host:port, unix:///path, "
       "redis+cluster://host:port,host:port,..., rediss+cluster://..., "
       "redis+sentinel://host:port,host:port,.../master_name or rediss+sentinel://...)"},
      {"store:\n  url: redis://h:99999\n",
       "bad.yaml:2: store.url: bad Redis URL 'redis://h:99999': the port must be a number from 1 "
       "to 65535 (expected redis://[user:password@]host:port[/db], "
       "rediss://[user:password@]host:port[/db] (TLS) or unix:///path[?db=N])"},
      {"store:\n  url: redis://h:1\n  sentinel_password_env: SLUICE_STORE_URL_TEST_SET\n",
       "bad.yaml:3: store.sentinel_password_env: a sentinels' password needs a "
       "redis+sentinel:// store URL"},
      {"store:\n  url: redis+sentinel://h/m\n  sentinel_password_env: "
       "SLUICE_STORE_URL_TEST_UNSET\n",
       "bad.yaml:3: store.sentinel_password_env: the environment variable "
       "'SLUICE_STORE_URL_TEST_UNSET' is not set or is empty"},
      {"store:\n  url: redis+sentinel://h/m\n  sentinel_user: sluice\n",
       "bad.yaml:3: store.sentinel_user: a sentinel user needs its password: "
       "sentinel_password_file or sentinel_password_env"},
      {"store:\n  url: redis+sentinel://h/m\n  sentinel_user: ''\n  sentinel_password_env: "
       "SLUICE_STORE_URL_TEST_SET\n",
       "bad.yaml:3: store.sentinel_user: must not be empty"},
      {"store:\n  url: redis+sentinel://h/m\n  tls: {server_name: redis.internal}\n",
       "bad.yaml:3: store.tls: the store URL is not one over TLS: use rediss://, "
       "rediss+cluster:// or rediss+sentinel://"},
  };
  for (const auto& [yaml, error] : cases) {
    auto config = ParseConfig(yaml + kRules, "bad.yaml");
    ASSERT_FALSE(config.ok()) << yaml;
    EXPECT_EQ(config.status().message(), error) << yaml;
    EXPECT_EQ(config.status().message().find("hunter"), std::string::npos);
  }
  ::unsetenv("SLUICE_STORE_URL_TEST_SET");
}

}  // namespace
}  // namespace sluice::config
