#include "store_test_support.h"

#include <atomic>
#include <charconv>

namespace sluice::testing {

using namespace std::chrono_literals;

std::unique_ptr<redis::Client> Inspector(int port) {
  redis::ClientOptions options;
  options.port = port;
  options.timeout = 5s;
  options.connect_timeout = 5s;
  auto client = redis::Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

int64_t CallsOnEveryNode(const RedisTarget& target, std::string_view command) {
  const std::string field = "cmdstat_" + std::string(command) + ":calls=";
  int64_t calls = 0;
  for (int port : target.ports) {
    auto client = Inspector(port);
    if (client == nullptr) continue;
    const std::string_view argv[] = {"INFO", "commandstats"};
    const Result<redis::Reply> info = client->CommandSync(argv);
    if (!info.ok()) {
      ADD_FAILURE() << info.status().ToString();
      continue;
    }
    const size_t at = info->str.find(field);
    if (at != std::string::npos) calls += std::stoll(info->str.substr(at + field.size()));
  }
  return calls;
}

std::vector<std::string> KeysOnEveryNode(const RedisTarget& target, std::string_view stem,
                                         size_t count) {
  std::vector<std::string> keys;
  for (int n = 0; keys.size() < count && n < 100'000; ++n) {
    std::string key = std::string(stem) + std::to_string(n);
    if (target.node_of(key) == target.ports[keys.size() % target.ports.size()]) {
      keys.push_back(std::move(key));
    }
  }
  EXPECT_EQ(keys.size(), count) << "no keys '" << stem << "<n>' on every node";
  return keys;
}

size_t ExpectEveryKeyExpires(redis::Client& client, const std::string& pattern) {
  std::string cursor = "0";
  size_t seen = 0;
  for (int page = 0; page < 10'000; ++page) {
    const std::string_view scan[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    auto reply = client.CommandSync(scan);
    if (!reply.ok() || reply->elements.size() != 2) {
      ADD_FAILURE() << "SCAN failed: " << reply.status().ToString();
      return seen;
    }
    for (const auto& key : reply->elements[1].elements) {
      const std::string_view pttl[] = {"PTTL", key.str};
      auto ttl = client.CommandSync(pttl);
      if (!ttl.ok()) {
        ADD_FAILURE() << "PTTL failed: " << ttl.status().ToString();
        continue;
      }
      // -2: it expired since SCAN saw it. -1 would be a key kept forever.
      EXPECT_NE(ttl->integer, -1) << "key without TTL: " << key.str;
      ++seen;
    }
    cursor = reply->elements[0].str;
    if (cursor == "0") break;
  }
  return seen;
}

size_t ExpectEveryKeyExpires(const RedisTarget& target, const std::string& pattern) {
  size_t seen = 0;
  for (int port : target.ports) {
    if (auto client = Inspector(port)) seen += ExpectEveryKeyExpires(*client, pattern);
  }
  return seen;
}

void ExpectKeysOnEveryNode(const RedisTarget& target, const std::string& pattern) {
  for (int port : target.ports) {
    auto client = Inspector(port);
    if (client == nullptr) continue;
    EXPECT_GT(ExpectEveryKeyExpires(*client, pattern), 0u)
        << "no key matching '" << pattern << "' on the node on port " << port;
  }
}

void RedisStoreTest::SetUp() {
  static std::atomic<int> tests{0};
  target_ = SharedTarget();
  ASSERT_NE(target_, nullptr) << "no Redis";
  prefix_ = "t" + std::to_string(tests.fetch_add(1)) + ":";
  client_ = Inspector(target_->ports.front());
  ASSERT_NE(client_, nullptr);
}

void RedisStoreTest::TearDown() {
  if (target_ != nullptr) ExpectEveryKeyExpires(*target_, prefix_ + "*");
}

std::unique_ptr<RedisStore> RedisStoreTest::MakeStore(RedisStoreOptions options) {
  options.url = target_->url;
  options.tls = target_->tls;
  options.key_prefix = prefix_;
  options.timeout = 5s;
  options.connect_timeout = 5s;
  auto store = RedisStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

redis::Reply RedisStoreTest::Command(std::initializer_list<std::string_view> argv) {
  auto reply = client_->CommandSync(std::span(argv.begin(), argv.size()));
  EXPECT_TRUE(reply.ok()) << reply.status().ToString();
  return reply.ok() ? std::move(*reply) : redis::Reply{};
}

int64_t RedisStoreTest::InfoNumber(std::string_view section, std::string_view field) {
  const std::string info = Command({"INFO", section}).str;
  const size_t at = info.find(field);
  if (at == std::string::npos) return 0;
  const char* begin = info.data() + at + field.size() + 1;
  int64_t value = 0;
  std::from_chars(begin, info.data() + info.size(), value);
  return value;
}

std::vector<std::string> RedisStoreTest::Scan(const std::string& pattern) {
  std::vector<std::string> keys;
  for (int port : target_->ports) {
    auto client = Inspector(port);
    if (client == nullptr) continue;
    std::string cursor = "0";
    for (int page = 0; page < 10'000; ++page) {
      const std::string_view scan[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
      auto reply = client->CommandSync(scan);
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
      if (!reply.ok() || reply->elements.size() != 2) break;
      for (auto& key : reply->elements[1].elements) keys.push_back(key.str);
      cursor = reply->elements[0].str;
      if (cursor == "0") break;
    }
  }
  return keys;
}

}  // namespace sluice::testing
