// A flood of distinct keys on `sluice serve` with the memory:// store: the real binary
// (its path is the first argument of this test program), store.max_memory set small, several
// times that bound's worth of new keys sent through /v1/check batches. The process's memory stays
// within the bound and a documented slack, the store evicts, and a key in use keeps its exact
// count throughout.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/serve_process.h"

namespace {

using nlohmann::json;
using sluice::testing::MetricValue;
using sluice::testing::Service;

constexpr int64_t kMaxMemory = int64_t{8} << 20;
// What the process may grow by beyond max_memory (docs/security.md, "Floods: memory"): the HTTP
// connections' buffers, malloc's arenas and the pages of freed blocks it keeps, measured at about
// 2 MB.
constexpr int64_t kSlack = int64_t{8} << 20;

// The process's resident memory, in bytes (VmRSS of /proc/PID/status); -1 if unreadable.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

TEST(ServeMemoryFlood, ManyTimesMaxMemoryOfNewKeysStaysWithinTheBound) {
  // Nothing goes back to fresh within the test: every key the store drops is evicted live.
  Service service(R"(rules:
  - { name: flood, algorithm: sliding_log, limit: 5, period: 1h }
  - { name: client, algorithm: fixed_window, limit: 1000000, period: 1h }
)",
                  "memory://", "max_memory: 8MiB");
  ASSERT_TRUE(service.up()) << service.process().Log();
  httplib::Client client = service.Client();
  int64_t client_checks = 0;
  const auto check_client = [&] {
    auto r = client.Post("/v1/check", R"({"rule":"client","key":"steady"})", "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json body = json::parse(r->body);
    EXPECT_EQ(body["allowed"], true);
    EXPECT_EQ(body["remaining"], 1000000 - ++client_checks);
  };
  check_client();
  const int64_t before = ResidentBytes(service.process().pid());
  ASSERT_GT(before, 0);

  // Keys of 40 bytes (held out of line, with a sliding_log entry each on the heap): at 64 bytes
  // a slot, 4 × max_memory / 64 keys is over four times what the store could hold.
  constexpr int kBatch = 800;  // 52 KB of JSON, under the 64 KiB body cap
  constexpr int kBatches = static_cast<int>(4 * kMaxMemory / 64 / kBatch);
  const auto started = std::chrono::steady_clock::now();
  int64_t peak = before;
  for (int b = 0; b < kBatches; ++b) {
    std::string body = R"({"checks":[)";
    for (int i = 0; i < kBatch; ++i) {
      char key[48];
      std::snprintf(key, sizeof key, "tenant-00000000:user-%019d", b * kBatch + i);
      body += (i ? R"(,{"rule":"flood","key":")" : R"({"rule":"flood","key":")");
      body += key;
      body += R"("})";
    }
    body += "]}";
    auto r = client.Post("/v1/check", body, "application/json");
    ASSERT_TRUE(r) << b;
    ASSERT_EQ(r->status, 200) << r->body.substr(0, 300);
    const json results = json::parse(r->body)["results"];
    ASSERT_EQ(results.size(), static_cast<size_t>(kBatch));
    for (const json& result : results) ASSERT_EQ(result["allowed"], true) << result.dump();
    if (b % 16 == 0) {
      check_client();
      peak = std::max(peak, ResidentBytes(service.process().pid()));
    }
  }
  check_client();
  peak = std::max(peak, ResidentBytes(service.process().pid()));
  const auto took = std::chrono::steady_clock::now() - started;

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  const int64_t bytes = MetricValue(metrics->body, "sluice_memory_store_bytes");
  const int64_t keys = MetricValue(metrics->body, "sluice_memory_store_keys");
  const int64_t lru =
      MetricValue(metrics->body, "sluice_memory_store_evictions_total{reason=\"lru\"}");
  EXPECT_EQ(MetricValue(metrics->body, "sluice_memory_store_max_bytes"), kMaxMemory);
  EXPECT_GT(bytes, kMaxMemory / 2);  // the bound is what held it, not something smaller
  EXPECT_LE(bytes, kMaxMemory);
  EXPECT_EQ(keys + lru, int64_t{kBatches} * kBatch + 1);  // the flood's keys and "steady"
  EXPECT_GT(lru, int64_t{kBatches} * kBatch / 2);
  EXPECT_EQ(MetricValue(metrics->body, "sluice_memory_store_evictions_total{reason=\"fresh\"}"), 0);
  EXPECT_LE(peak - before, kMaxMemory + kSlack)
      << "grew from " << before << " to " << peak << " bytes";
  RecordProperty("rss_growth_bytes", std::to_string(peak - before));
  RecordProperty(
      "flood_ms",
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  std::printf(
      "%d keys in %lld ms; RSS %lld -> %lld bytes (peak), store %lld bytes, %lld keys\n",
      kBatches * kBatch,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
      static_cast<long long>(before), static_cast<long long>(peak), static_cast<long long>(bytes),
      static_cast<long long>(keys));
}

}  // namespace
