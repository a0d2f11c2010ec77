#include "http/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

bool Has(const std::string& text, std::string_view line) {
  return text.find(line) != std::string::npos;
}

TEST(MetricsTest, RuleCountersAreCreatedOnceAndKept) {
  Metrics metrics;
  RuleCounters& api = metrics.ForRule("api");
  EXPECT_EQ(&metrics.ForRule("api"), &api);
  metrics.CountDecision(api, Decision{.allowed = true});
  metrics.CountDecision(api, Decision{.allowed = true, .source = DecisionSource::kFailOpen});
  metrics.CountDecision(api, Decision{.allowed = false});
  metrics.ForRule("login");
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "# TYPE sluice_checks_total counter\n"));
  EXPECT_TRUE(Has(text, "sluice_checks_total{rule=\"api\",result=\"allowed\"} 2\n"));
  EXPECT_TRUE(Has(text, "sluice_checks_total{rule=\"api\",result=\"denied\"} 1\n"));
  EXPECT_TRUE(Has(text, "sluice_decisions_total{rule=\"api\",source=\"store\"} 2\n"));
  EXPECT_TRUE(Has(text, "sluice_decisions_total{rule=\"api\",source=\"fail_open\"} 1\n"));
  EXPECT_TRUE(Has(text, "sluice_decisions_total{rule=\"login\",source=\"local_fallback\"} 0\n"));
  EXPECT_FALSE(Has(text, "sluice_breaker_state"));  // no ResilientStore watched
  EXPECT_TRUE(Has(text, "sluice_checks_total{rule=\"login\",result=\"allowed\"} 0\n"));
}

// A MemoryStore's memory, read through its StoreMemory interface at each exposition.
TEST(MetricsTest, MemoryStoreBytesBoundAndEvictions) {
  ManualClock clock;
  MemoryStore store(MemoryStoreOptions{.clock = &clock, .max_memory = size_t{1} << 20});
  Metrics metrics;
  EXPECT_FALSE(Has(metrics.Exposition(), "sluice_memory_store"));  // no store watched
  metrics.Watch(store);
  const Limit limit = *Limit::Create(Algorithm::kGcra, 10, std::chrono::seconds(1));
  ASSERT_TRUE(store.Check({.scope = "api", .limit = &limit, .key = "a"})->allowed);
  std::string text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "# TYPE sluice_memory_store_bytes gauge\n"));
  EXPECT_TRUE(Has(text, "sluice_memory_store_bytes 4096\n")) << text;  // the first table's page
  EXPECT_TRUE(Has(text, "sluice_memory_store_max_bytes 1048576\n"));
  EXPECT_TRUE(Has(text, "sluice_memory_store_keys 1\n"));
  EXPECT_TRUE(Has(text, "# TYPE sluice_memory_store_evictions_total counter\n"));
  EXPECT_TRUE(Has(text, "sluice_memory_store_evictions_total{reason=\"fresh\"} 0\n"));
  EXPECT_TRUE(Has(text, "sluice_memory_store_evictions_total{reason=\"lru\"} 0\n"));
  clock.Advance(std::chrono::seconds(1));
  ASSERT_EQ(store.Sweep(), 1u);
  text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "sluice_memory_store_keys 0\n"));
  EXPECT_TRUE(Has(text, "sluice_memory_store_evictions_total{reason=\"fresh\"} 1\n"));
}

// What a LeasingStore reports of its leases, here set by the test.
class FixedLeases final : public LeaseReport {
 public:
  LeaseStats stats;
  LeaseStats lease_stats() const override { return stats; }
};

TEST(MetricsTest, LeasesAreExposedOnlyWhenWatched) {
  Metrics metrics;
  EXPECT_FALSE(Has(metrics.Exposition(), "sluice_lease"));  // no LeasingStore watched
  FixedLeases leases;
  metrics.Watch(leases);
  leases.stats = {.taken = 12,
                  .units_taken = 120,
                  .units_used = 101,
                  .units_returned = 15,
                  .units_lapsed = 4,
                  .refusals = 3,
                  .held = 2};
  std::string text = metrics.Exposition();
  for (std::string_view line : {
           "# HELP sluice_lease_taken_total Leases taken from the store.\n",
           "# TYPE sluice_lease_taken_total counter\nsluice_lease_taken_total 12\n",
           "# TYPE sluice_lease_units_taken_total counter\nsluice_lease_units_taken_total 120\n",
           "# TYPE sluice_lease_units_used_total counter\nsluice_lease_units_used_total 101\n",
           "# TYPE sluice_lease_units_returned_total counter\n"
           "sluice_lease_units_returned_total 15\n",
           "# TYPE sluice_lease_units_lapsed_total counter\nsluice_lease_units_lapsed_total 4\n",
           "# TYPE sluice_lease_refusals_total counter\nsluice_lease_refusals_total 3\n",
           "# TYPE sluice_lease_held_keys gauge\nsluice_lease_held_keys 2\n",
       }) {
    EXPECT_TRUE(Has(text, line)) << line << "\nin:\n" << text;
  }
  // Read at each exposition.
  leases.stats.held = 0;
  EXPECT_TRUE(Has(metrics.Exposition(), "\nsluice_lease_held_keys 0\n"));
}

// Counts of acquires in progress, as the acquire lines keep them.
class FixedWaiters final : public WaiterCounts {
 public:
  explicit FixedWaiters(std::map<std::string, size_t, std::less<>> counts)
      : counts_(std::move(counts)) {}
  size_t Waiters(std::string_view rule) const override {
    const auto it = counts_.find(rule);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, size_t, std::less<>> counts_;
};

TEST(MetricsTest, AcquireOutcomesAndWaitersPerRule) {
  Metrics metrics;
  RuleCounters& shaped = metrics.ForRule("shaped");
  metrics.ForRule("other");
  metrics.CountAcquire(shaped, AcquireOutcome::kAdmitted);
  metrics.CountAcquire(shaped, AcquireOutcome::kAdmitted);
  metrics.CountAcquire(shaped, AcquireOutcome::kQueueFull);
  metrics.CountAcquire(shaped, AcquireOutcome::kCancelled);
  const FixedWaiters waiters({{"shaped", 3}});
  metrics.Watch(waiters);
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "# TYPE sluice_acquires_total counter\n"));
  EXPECT_TRUE(Has(text, "sluice_acquires_total{rule=\"shaped\",outcome=\"admitted\"} 2\n"));
  EXPECT_TRUE(Has(text, "sluice_acquires_total{rule=\"shaped\",outcome=\"denied\"} 0\n"));
  EXPECT_TRUE(Has(text, "sluice_acquires_total{rule=\"shaped\",outcome=\"queue_full\"} 1\n"));
  EXPECT_TRUE(Has(text, "sluice_acquires_total{rule=\"shaped\",outcome=\"cancelled\"} 1\n"));
  EXPECT_TRUE(Has(text, "sluice_acquires_total{rule=\"other\",outcome=\"admitted\"} 0\n"));
  EXPECT_TRUE(Has(text, "# TYPE sluice_acquire_waiters gauge\n"));
  EXPECT_TRUE(Has(text, "sluice_acquire_waiters{rule=\"shaped\"} 3\n")) << text;
  EXPECT_TRUE(Has(text, "sluice_acquire_waiters{rule=\"other\"} 0\n"));
  metrics.StopWatching(waiters);
}

TEST(MetricsTest, WaitersOfSeveralCountsAddUpWhileWatched) {
  Metrics metrics;
  metrics.ForRule("shaped");
  const FixedWaiters first({{"shaped", 2}});
  const FixedWaiters second({{"shaped", 5}, {"unknown", 1}});
  metrics.Watch(first);
  metrics.Watch(second);
  EXPECT_TRUE(Has(metrics.Exposition(), "sluice_acquire_waiters{rule=\"shaped\"} 7\n"));
  EXPECT_FALSE(Has(metrics.Exposition(), "unknown"));  // rules come from the Metrics
  metrics.StopWatching(first);
  EXPECT_TRUE(Has(metrics.Exposition(), "sluice_acquire_waiters{rule=\"shaped\"} 5\n"));
  metrics.StopWatching(second);
  EXPECT_TRUE(Has(metrics.Exposition(), "sluice_acquire_waiters{rule=\"shaped\"} 0\n"));
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Metrics metrics;
  metrics.ObserveCheckDuration(microseconds(30));         // <= 50us
  metrics.ObserveCheckDuration(microseconds(50));         // <= 50us: bounds are inclusive
  metrics.ObserveCheckDuration(microseconds(700));        // <= 1ms
  metrics.ObserveCheckDuration(std::chrono::seconds(3));  // +Inf only
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "# TYPE sluice_check_duration_seconds histogram\n"));
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_bucket{le=\"5e-05\"} 2\n")) << text;
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_bucket{le=\"0.0005\"} 2\n"));
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_bucket{le=\"0.001\"} 3\n"));
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_bucket{le=\"1\"} 3\n"));
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_bucket{le=\"+Inf\"} 4\n"));
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_sum 3.00078\n")) << text;
  EXPECT_TRUE(Has(text, "sluice_check_duration_seconds_count 4\n"));
  EXPECT_EQ(metrics.check_duration_count_for_testing(), 4u);
}

TEST(MetricsTest, HttpResponsesByCodeWithOthersTogether) {
  Metrics metrics;
  metrics.CountHttpResponse(200);
  metrics.CountHttpResponse(200);
  metrics.CountHttpResponse(503);
  metrics.CountHttpResponse(418);
  metrics.CountHttpResponse(501);
  metrics.CountStoreError();
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "sluice_http_requests_total{code=\"200\"} 2\n"));
  EXPECT_TRUE(Has(text, "sluice_http_requests_total{code=\"503\"} 1\n"));
  EXPECT_TRUE(Has(text, "sluice_http_requests_total{code=\"other\"} 2\n"));
  EXPECT_TRUE(Has(text, "sluice_store_errors_total 1\n"));
  EXPECT_EQ(metrics.http_responses_for_testing(418), 2u);  // "other"
}

TEST(MetricsTest, ConnectionsOpenRefusedReclaimedAndAcceptErrors) {
  Metrics metrics;
  metrics.SetOpenConnections(7);
  metrics.SetOpenConnections(5);
  metrics.CountConnectionRefused();
  metrics.CountConnectionRefused();
  metrics.CountIdleConnectionClosed();
  metrics.CountAcceptError();
  metrics.CountAcceptError();
  metrics.CountAcceptError();
  const std::string text = metrics.Exposition();
  EXPECT_TRUE(Has(text, "# TYPE sluice_http_connections gauge\nsluice_http_connections 5\n"));
  EXPECT_TRUE(Has(text,
                  "# TYPE sluice_http_connections_refused_total counter\n"
                  "sluice_http_connections_refused_total 2\n"));
  EXPECT_TRUE(Has(text, "sluice_http_idle_connections_closed_total 1\n"));
  EXPECT_TRUE(Has(text, "sluice_http_accept_errors_total 3\n")) << text;
}

TEST(MetricsTest, CountsFromManyThreadsAddUp) {
  Metrics metrics;
  RuleCounters& rule = metrics.ForRule("api");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        metrics.CountDecision(rule, Decision{.allowed = i % 2 == 0});
        metrics.CountHttpResponse(200);
        metrics.ObserveCheckDuration(milliseconds(1));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(rule.allowed.load(), 2000u);
  EXPECT_EQ(rule.denied.load(), 2000u);
  EXPECT_EQ(metrics.http_responses_for_testing(200), 4000u);
  EXPECT_EQ(metrics.check_duration_count_for_testing(), 4000u);
}

}  // namespace
}  // namespace sluice::http
