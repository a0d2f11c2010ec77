// `sluice serve` through each fault of support/redis_faults.h (killed and restarted, hung, slowed
// by a proxy, scripts flushed, clients killed, full): the real binary (its path is the first
// argument of this program) on a real redis-server, with one rule per failure policy, under a
// concurrent HTTP load of keep-alive clients. For each fault: every answer comes within the
// deadline plus an HTTP margin; each rule's own policy decides during the fault, as the JSON's
// `source` and `degraded` say; /healthz answers throughout; /readyz says not ready during the
// fault and ready after it; decisions come from Redis again within 1 s of the fault clearing; a
// fresh window then admits exactly its limit; and the process is still alive, its memory
// bounded, and stops with status 0 on SIGTERM.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/decision_counts.h"
#include "support/redis_faults.h"
#include "support/redis_server.h"
#include "support/serve_process.h"
#include "support/stall_watch.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using sluice::DecisionSource;
using sluice::FailurePolicy;
using sluice::testing::DecisionCounts;
using sluice::testing::DecisionTally;
using sluice::testing::kPolicies;
using sluice::testing::Micros;
using sluice::testing::Millis;
using sluice::testing::RaiseTo;
using sluice::testing::RedisFault;
using sluice::testing::Service;
using sluice::testing::SourceNamed;
using sluice::testing::SourceOf;
using Steady = std::chrono::steady_clock;

constexpr auto kDeadline = 50ms;  // store.timeout_ms's default
// On top of the store's deadline: the decision's own 10 ms (as in tests/redis/fault_test.cc) and
// 15 ms for an HTTP exchange on loopback (the client library, parsing the request, writing the
// answer) on a 2-core machine that also runs Redis and the client threads. Bounds add the worst
// stall of the machine a StallWatch saw meanwhile.
constexpr auto kHttpMargin = 25ms;
constexpr size_t kMemoryBound = 8u << 20;
constexpr int kClients = 4;

// The rules under load, one per policy, in the order of kPolicies.
constexpr std::array<const char*, 3> kRules = {"open", "closed", "local"};

// The service's rules: those of kRules, and a fixed window for the exactness check.
constexpr const char* kConfigRules = R"(rules:
  - {name: open, algorithm: gcra, limit: 1000000, period: 1s, on_error: fail_open}
  - {name: closed, algorithm: gcra, limit: 1000000, period: 1s, on_error: fail_closed}
  - {name: local, algorithm: gcra, limit: 1000000, period: 1s, on_error: local_fallback}
  - {name: exact, algorithm: fixed_window, limit: 50, period: 1h, on_error: fail_closed}
)";

std::string CheckBody(const std::string& rule, const std::string& key) {
  return R"({"rule":")" + rule + R"(","key":")" + key + R"("})";
}

// The decision in an answer to /v1/check, with a known `source` and boolean `allowed` and
// `degraded`; null if the answer is not one.
json DecisionOf(const httplib::Result& r) {
  if (!r || r->status != 200) return nullptr;
  json d = json::parse(r->body, nullptr, false);
  if (!d.is_object()) return nullptr;
  for (const char* field : {"allowed", "degraded"}) {
    if (!d.contains(field) || !d[field].is_boolean()) return nullptr;
  }
  if (!d.contains("source") || !d["source"].is_string() ||
      !SourceNamed(d["source"].get<std::string>())) {
    return nullptr;
  }
  return d;
}

// kClients threads, each on its own keep-alive connection, posting checks over the three rules
// and 1000 keys (a short pause between checks), each answer timed.
class HttpLoad {
 public:
  explicit HttpLoad(const Service& service) {
    for (int t = 0; t < kClients; ++t) {
      threads_.emplace_back([this, &service, t] {
        httplib::Client client = service.Client();
        for (int i = 0; !stop_.load() && i < 1'000'000; ++i) {
          const size_t rule = static_cast<size_t>(t + i) % kRules.size();
          const std::string body =
              CheckBody(kRules[rule], "k" + std::to_string((t * 7919 + i) % 1000));
          const auto start = Steady::now();
          auto r = client.Post("/v1/check", body, "application/json");
          RaiseTo(max_us_, Micros(Steady::now() - start));
          Count(rule, r);
          ++progress_[t];
          std::this_thread::sleep_for(200us);
        }
      });
    }
  }
  ~HttpLoad() { Stop(); }

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // By the rule's policy and the `source` the JSON reported.
  DecisionCounts Snapshot() const { return decisions_.Snapshot(); }
  int64_t errors() const { return errors_.load(); }
  int64_t late_here() const { return late_here_.load(); }
  int64_t inconsistent() const { return inconsistent_.load(); }
  int64_t max_us() const { return max_us_.load(); }
  std::array<int64_t, kClients> progress() const {
    std::array<int64_t, kClients> p;
    for (int t = 0; t < kClients; ++t) p[t] = progress_[t].load();
    return p;
  }

 private:
  void Count(size_t rule, const httplib::Result& r) {
    if (r && r->status == 503 && r->has_header("Retry-After")) {
      ++late_here_;  // waited past half its deadline in sluice's own queue: refused
      return;
    }
    const json d = DecisionOf(r);
    if (d.is_null()) {
      ++errors_;
      return;
    }
    const DecisionSource source = *SourceNamed(d["source"].get<std::string>());
    // degraded: a failure policy decided.
    const bool by_policy = std::any_of(kPolicies.begin(), kPolicies.end(),
                                       [source](FailurePolicy p) { return SourceOf(p) == source; });
    if (d["degraded"].get<bool>() != by_policy) ++inconsistent_;
    decisions_.Add(rule, source, d["allowed"].get<bool>());
  }

  std::atomic<bool> stop_{false};
  DecisionTally decisions_;
  std::atomic<int64_t> errors_{0};
  std::atomic<int64_t> late_here_{0};
  std::atomic<int64_t> inconsistent_{0};
  std::atomic<int64_t> max_us_{0};
  std::atomic<int64_t> progress_[kClients] = {};
  std::vector<std::thread> threads_;
};

// Polls /healthz and /readyz every 10 ms, each on its own connection, timing the answers and
// recording when /readyz answered what.
class HealthWatch {
 public:
  struct Ready {
    Steady::time_point asked, answered;
    int status;  // -1: no answer
  };

  explicit HealthWatch(const Service& service)
      : thread_([this, &service] {
          httplib::Client health = service.Client(), ready = service.Client();
          for (int i = 0; !stop_.load() && i < 10'000; ++i) {
            auto start = Steady::now();
            auto h = health.Get("/healthz");
            RaiseTo(health_max_us_, Micros(Steady::now() - start));
            ++(h && h->status == 200 ? healthy_ : unhealthy_);
            start = Steady::now();
            auto r = ready.Get("/readyz");
            RaiseTo(ready_max_us_, Micros(Steady::now() - start));
            {
              std::lock_guard lock(mu_);
              readiness_.push_back({start, Steady::now(), r ? r->status : -1});
            }
            std::this_thread::sleep_for(10ms);
          }
        }) {}
  ~HealthWatch() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t healthy() const { return healthy_.load(); }
  int64_t unhealthy() const { return unhealthy_.load(); }
  int64_t health_max_us() const { return health_max_us_.load(); }
  int64_t ready_max_us() const { return ready_max_us_.load(); }
  std::vector<Ready> readiness() const {
    std::lock_guard lock(mu_);
    return readiness_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> healthy_{0}, unhealthy_{0};
  std::atomic<int64_t> health_max_us_{0}, ready_max_us_{0};
  mutable std::mutex mu_;
  std::vector<Ready> readiness_;
  std::thread thread_;
};

// Whether /readyz answers 200 within 5 s: the store's connections are up and its probe answered.
bool Ready(const Service& service) {
  httplib::Client client = service.Client();
  const auto until = Steady::now() + 5s;
  for (int i = 0; i < 500 && Steady::now() < until; ++i) {
    if (auto r = client.Get("/readyz"); r && r->status == 200) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

class ServeFaultTest : public ::testing::TestWithParam<RedisFault> {};

TEST_P(ServeFaultTest, AnswersWithinTheDeadlineByPolicyAndRecovers) {
  const RedisFault fault = GetParam();
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  auto injector = sluice::testing::FaultInjector::Create(*redis, fault);
  ASSERT_NE(injector, nullptr);
  Service service(kConfigRules, "redis://127.0.0.1:" + std::to_string(injector->port()),
                  "instances: 2");
  ASSERT_TRUE(service.up()) << service.process().Log();
  // Measured from ready on: /healthz answers before the store's first connection is up, and
  // the first probe may pay for it on a loaded machine.
  ASSERT_TRUE(Ready(service)) << service.process().Log();
  sluice::testing::ResidentPeak memory(service.process().pid());
  sluice::testing::StallWatch stalls;

  HttpLoad load(service);
  HealthWatch watch(service);
  std::this_thread::sleep_for(300ms);
  const size_t memory_before = memory.Restart();
  const DecisionCounts before = load.Snapshot();
  for (size_t r = 0; r < kRules.size(); ++r) {
    EXPECT_GT(before.By(r, DecisionSource::kStore), 0) << "Redis decided before the fault";
  }

  const auto injected = Steady::now();
  const int64_t healthy_before = watch.healthy();
  ASSERT_TRUE(injector->Inject());
  std::this_thread::sleep_for(400ms);
  const auto progress_mid = load.progress();
  std::this_thread::sleep_for(400ms);
  const auto progress_end = load.progress();
  const DecisionCounts during = load.Snapshot() - before;
  const int64_t healthy_during = watch.healthy() - healthy_before;
  ASSERT_TRUE(injector->Clear());
  const auto cleared = Steady::now();

  // Decided by Redis again: a probe of our own on fresh keys, every 5 ms, sees `source: store`
  // (within 3 s, or false).
  httplib::Client probe = service.Client();
  int probes = 0;
  const auto await_store = [&] {
    const auto start = Steady::now();
    for (int i = 0; i < 600 && Steady::now() - start < 3s; ++i) {
      auto r = probe.Post("/v1/check", CheckBody("closed", "probe-" + std::to_string(probes++)),
                          "application/json");
      const json d = DecisionOf(r);
      if (!d.is_null() && d["source"] == "store") return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  };
  const bool recovered = await_store();
  const auto recovery = Steady::now() - cleared;
  const DecisionCounts recovered_at = load.Snapshot();
  std::this_thread::sleep_for(300ms);
  const DecisionCounts after = load.Snapshot() - recovered_at;
  load.Stop();
  watch.Stop();
  const size_t memory_peak = memory.peak();

  // Readiness: answered not ready from when to when during the fault (asked after it began,
  // answered before it cleared), any answer other than ready before it began, and when the first
  // ready came of those asked after it cleared.
  std::optional<Steady::duration> not_ready_from, not_ready_until, ready_again;
  int not_ready_before = 0;
  for (const auto& [asked, answered, status] : watch.readiness()) {
    if (status != 200 && asked >= injected && answered < cleared) {
      if (!not_ready_from) not_ready_from = answered - injected;
      not_ready_until = answered - injected;
    } else if (status != 200 && answered < injected) {
      std::printf("/readyz answered %d %.0f ms before the fault\n", status,
                  Millis(injected - answered));
      ++not_ready_before;
    } else if (status == 200 && asked >= cleared && !ready_again) {
      ready_again = answered - cleared;
    }
  }

  std::printf(
      "[%s] serve: slowest answer %.1f ms /v1/check, %.1f ms /healthz, %.1f ms /readyz "
      "(deadline %lld ms + HTTP margin %lld ms); during the %.0f ms of the fault: %s; /healthz "
      "answered %ld times; /readyz not ready from +%.0f to +%.0f ms; back on Redis %.0f ms after "
      "the fault cleared, ready after %.0f ms; resident memory %zu MiB, peak +%zd KiB; CPU "
      "pressure %.0f%%, worst stall of this process %.1f ms\n",
      sluice::testing::RedisFaultName(fault), static_cast<double>(load.max_us()) / 1000,
      static_cast<double>(watch.health_max_us()) / 1000,
      static_cast<double>(watch.ready_max_us()) / 1000, static_cast<long long>(kDeadline.count()),
      static_cast<long long>(kHttpMargin.count()), Millis(cleared - injected),
      during.ToString().c_str(), static_cast<long>(healthy_during),
      not_ready_from ? Millis(*not_ready_from) : -1.0,
      not_ready_until ? Millis(*not_ready_until) : -1.0, Millis(recovery),
      ready_again ? Millis(*ready_again) : -1.0, memory_before >> 20,
      (static_cast<ssize_t>(memory_peak) - static_cast<ssize_t>(memory_before)) / 1024,
      sluice::testing::CpuPressure(), Millis(stalls.worst()));

  EXPECT_EQ(load.errors(), 0) << "every check answered 200 with a decision, or 503 as late here";
  EXPECT_EQ(load.inconsistent(), 0) << "degraded is true exactly when a policy decided";
  const int64_t bound_us = Micros(kDeadline + kHttpMargin + stalls.worst());
  EXPECT_LE(load.max_us(), bound_us);
  EXPECT_LE(watch.health_max_us(), bound_us);
  EXPECT_LE(watch.ready_max_us(), bound_us);

  // A stall of the machine as long as half the deadline can time calls out, which the policy
  // then decides, whatever the fault.
  const bool machine_stalled = stalls.worst() >= kDeadline / 2;
  if (!machine_stalled) {
    EXPECT_EQ(load.late_here(), 0) << "a check is late in sluice's own queue only on a stall";
  }
  for (size_t r = 0; r < kRules.size(); ++r) {
    for (size_t other = 0; other < kRules.size(); ++other) {
      if (other != r) {
        EXPECT_EQ(during.By(r, SourceOf(kPolicies[other])), 0) << kRules[r];
      }
    }
    if (sluice::testing::PolicyMustDecide(fault)) {
      EXPECT_GT(during.By(r, SourceOf(kPolicies[r])), 0) << kRules[r] << "'s policy decided";
    }
    if (fault == RedisFault::kScriptsFlushed && !machine_stalled) {
      EXPECT_EQ(during.By(r, SourceOf(kPolicies[r])), 0) << "NOSCRIPT is handled inside the client";
    }
    EXPECT_GT(after.By(r, DecisionSource::kStore), 0) << "the load is back on Redis";
  }
  EXPECT_EQ(during.AllowedBy(0, DecisionSource::kFailOpen),
            during.By(0, DecisionSource::kFailOpen));
  EXPECT_EQ(during.AllowedBy(1, DecisionSource::kFailClosed), 0);
  EXPECT_EQ(during.AllowedBy(2, DecisionSource::kLocalFallback),
            during.By(2, DecisionSource::kLocalFallback));

  EXPECT_EQ(watch.unhealthy(), 0);
  EXPECT_GT(healthy_during, 0) << "/healthz answered during the fault";
  EXPECT_EQ(not_ready_before, 0) << "ready before the fault";
  if (sluice::testing::PolicyMustDecide(fault)) {
    EXPECT_TRUE(not_ready_from.has_value()) << "/readyz said not ready during the fault";
  }
  if (fault == RedisFault::kScriptsFlushed && !machine_stalled) {
    EXPECT_FALSE(not_ready_from.has_value());
  }
  ASSERT_TRUE(ready_again.has_value()) << "/readyz said ready after the fault";
  EXPECT_LT(*ready_again, 1s);

  for (int t = 0; t < kClients; ++t) {
    EXPECT_GT(progress_end[t], progress_mid[t]) << "client " << t << " is not stuck";
  }
  ASSERT_TRUE(recovered) << service.process().Log();
  EXPECT_LT(recovery, 1s);

  // A fresh fixed window admits exactly its limit, from Redis; once the store decides, in case a
  // stall of this machine since the recovery opened the breaker.
  ASSERT_TRUE(await_store());
  std::atomic<int> admitted{0}, degraded{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      httplib::Client client = service.Client();
      for (int i = 0; i < 40; ++i) {
        auto r = client.Post("/v1/check", CheckBody("exact", "fresh-window"), "application/json");
        const json d = DecisionOf(r);
        if (d.is_null() || d["degraded"] == true) {
          ++degraded;
        } else {
          admitted += d["allowed"] == true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 50) << "exactly the limit, of 160 concurrent attempts";
  EXPECT_EQ(degraded.load(), 0);

  EXPECT_FALSE(service.process().Exited()) << service.process().Log();
  EXPECT_LT(memory_peak, memory_before + kMemoryBound) << "bounded memory";
  EXPECT_EQ(service.process().Stop(5s), 0) << service.process().Log();
}

INSTANTIATE_TEST_SUITE_P(EachFault, ServeFaultTest,
                         ::testing::Values(RedisFault::kKilled, RedisFault::kHung,
                                           RedisFault::kSlowed, RedisFault::kScriptsFlushed,
                                           RedisFault::kClientsKilled, RedisFault::kFull),
                         [](const auto& info) {
                           return sluice::testing::RedisFaultName(info.param);
                         });

}  // namespace
