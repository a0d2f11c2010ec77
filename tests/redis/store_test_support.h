// Shared by the RedisStore tests: one Redis per test binary, a fixture giving each test its own
// key prefix and a client to inspect Redis with, and, after each test, the check that every key
// the test left behind has a TTL. The Redis is a target each binary links one definition of:
// one redis-server (single_redis_target.cc) for the store tests, a Redis Cluster
// (cluster_target.cc) for the cluster tests, so the same suites run on both.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/client.h"
#include "sluice/redis_store.h"
#include "support/redis_server.h"
#include "support/windows.h"

namespace sluice::testing {

struct RedisTarget {
  std::string url;         // RedisStoreOptions::url
  std::vector<int> ports;  // the nodes that hold keys
  // The port of the node holding the keys whose hash tag is `tag`: a store's keys for the key
  // `tag`, when it holds no '%', '{' or '}' (which the store escapes).
  std::function<int(std::string_view tag)> node_of;
  RedisTlsOptions tls{};  // RedisStoreOptions::tls, for a target over TLS
};

// Started on first use, stopped at exit; null (after printing why) if it cannot start.
const RedisTarget* SharedTarget();

// `count` keys "<stem><n>", the i-th held by the node ports[i % ports.size()], so that a suite
// using them touches every node. Fails the test, and returns fewer, if the nodes of 100 000
// candidates do not provide them.
std::vector<std::string> KeysOnEveryNode(const RedisTarget& target, std::string_view stem,
                                         size_t count);

// Fails the current test unless every key matching `pattern` has a TTL (PTTL never -1).
// Returns how many keys it saw.
size_t ExpectEveryKeyExpires(redis::Client& client, const std::string& pattern);
// The same on every node of the target.
size_t ExpectEveryKeyExpires(const RedisTarget& target, const std::string& pattern);
// The same, and fails the current test unless every node holds some key matching `pattern`.
void ExpectKeysOnEveryNode(const RedisTarget& target, const std::string& pattern);

// How many times the nodes of the target ran `command` ("evalsha"), summed (INFO commandstats).
int64_t CallsOnEveryNode(const RedisTarget& target, std::string_view command);

// A plain single-node client of the server on `port` (loopback), with generous timeouts, to look
// at what the store wrote; null (with a test failure) if it cannot be created.
std::unique_ptr<redis::Client> Inspector(int port);

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A store on the shared target under this test's prefix; a generous deadline, since the
  // machine may be loaded.
  std::unique_ptr<RedisStore> MakeStore(RedisStoreOptions options = {});
  // On the target's first node.
  redis::Reply Command(std::initializer_list<std::string_view> argv);
  // The integer after "<field>:" (or "<field>=") in an INFO section of the first node; 0 when
  // absent.
  int64_t InfoNumber(std::string_view section, std::string_view field);
  std::vector<std::string> Scan(const std::string& pattern);

  const RedisTarget* target_ = nullptr;
  std::string prefix_;
  std::unique_ptr<redis::Client> client_;
};

}  // namespace sluice::testing
