#include "batch_test_support.h"

#include <gtest/gtest.h>

#include <future>
#include <span>
#include <string_view>
#include <vector>

namespace sluice::testing {

BatchCost SendOrderedBatch(redis::Client& client, const std::string& key_prefix, int calls) {
  const redis::Script script = redis::Script::FromSource(
      "return {redis.call('INCRBY', KEYS[1], ARGV[1]), tonumber(ARGV[1])}");
  std::vector<std::string> keys, amounts;
  for (int i = 0; i < calls; ++i) {
    keys.push_back(key_prefix + "batch" + std::to_string(i));
    amounts.push_back(std::to_string(i));
  }
  std::vector<std::string_view> key_views(keys.begin(), keys.end());
  std::vector<std::string_view> amount_views(amounts.begin(), amounts.end());
  std::vector<redis::ScriptCall> batch;
  for (size_t i = 0; i < keys.size(); ++i) {
    batch.push_back({&script, std::span(&key_views[i], 1), std::span(&amount_views[i], 1)});
  }
  auto run = [&] {
    std::promise<std::vector<Result<redis::Reply>>> done;
    client.EvalShaBatch(batch, [&](auto results) { done.set_value(std::move(results)); });
    return done.get_future().get();
  };
  run();  // loads the script (NOSCRIPT, then SCRIPT LOAD), on every node
  const redis::ClientStats before = client.stats_for_testing();
  const auto results = run();
  const redis::ClientStats after = client.stats_for_testing();
  EXPECT_EQ(results.size(), batch.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      ADD_FAILURE() << results[i].status().ToString();
      break;
    }
    if (results[i]->elements.size() != 2u) {
      ADD_FAILURE() << "unexpected reply: " << results[i]->str;
      break;
    }
    EXPECT_EQ(results[i]->elements[0].integer, 2 * static_cast<int64_t>(i));
    EXPECT_EQ(results[i]->elements[1].integer, static_cast<int64_t>(i));
  }
  return {.commands = after.commands - before.commands, .writes = after.writes - before.writes};
}

}  // namespace sluice::testing
