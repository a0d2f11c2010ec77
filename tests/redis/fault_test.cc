// Faults of a real redis-server under a steady concurrent load, through RedisStore wrapped in a
// ResilientStore with its default options (the stack `sluice serve` runs), for each fault of
// support/redis_faults.h: killed and restarted, hung (SIGSTOP), slowed by a latency-injecting
// proxy, its scripts flushed, its clients killed, and full (maxclients). The load is
// sluice-bench-style: threads checking in a loop and a thread keeping many asynchronous checks in
// flight, over three rules, one per failure policy. For each fault: every decision returns within
// the deadline plus 10 ms; each rule's own policy decides during the fault and no other; the
// calls pending at Redis stay within the client's bound (the excess fails fast) and memory within
// a bound; no thread stops making progress and no call is left unanswered; decisions come from
// Redis again within 1 s of the fault clearing; and a fresh window then admits exactly its limit.
// And, for each fault, how many of the calls reported failed Redis applied all the same. The
// faults but the slowed network run over TLS too (rediss://), with the same expectations.
#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/redis_store.h"
#include "sluice/resilient_store.h"
#include "support/certificates.h"
#include "support/decision_counts.h"
#include "support/redis_faults.h"
#include "support/redis_server.h"
#include "support/stall_watch.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::DecisionCounts;
using testing::DecisionTally;
using testing::kPolicies;
using testing::Micros;
using testing::Millis;
using testing::RaiseTo;
using testing::RedisFault;
using testing::SourceOf;
using Steady = std::chrono::steady_clock;

const Duration kDeadline = RedisStoreOptions{}.timeout;  // 50 ms, the default
// What a decision may take beyond the deadline: 10 ms of its own, and whatever stall of the
// machine a StallWatch saw in this process meanwhile.
constexpr auto kSlack = 10ms;
// The calls pending per connection beyond which the client refuses more at once: the default,
// but for a hung or slowed Redis, where it is lowered so that the asynchronous load exceeds it
// before the breaker opens: the bound and its fail-fast are part of what is proven there.
size_t MaxPendingPerConnection(RedisFault fault) {
  return fault == RedisFault::kHung || fault == RedisFault::kSlowed
             ? 64
             : RedisStoreOptions{}.max_pending_per_connection;
}
constexpr int kConnections = 2;  // RedisStoreOptions::connections_per_thread to one Redis
constexpr int kSyncThreads = 4;
constexpr int kAsyncPerMillisecond = 10;  // 10 000 checks/s
constexpr int64_t kMaxOutstanding = 2000;
constexpr size_t kMemoryBound = 8u << 20;

// Decisions counted, the errors, the checks refused as late in this process's own queue, and the
// slowest synchronous and asynchronous decision.
class Tally {
 public:
  void Add(size_t policy, const Result<Decision>& d, Steady::duration took, bool async) {
    RaiseTo(async ? async_max_us_ : sync_max_us_, Micros(took));
    if (!d.ok()) {
      ++(d.status().code() == StatusCode::kResourceExhausted ? late_here_ : errors_);
      return;
    }
    decisions_.Add(policy, d->source, d->allowed);
  }
  DecisionCounts Snapshot() const { return decisions_.Snapshot(); }
  int64_t errors() const { return errors_.load(); }
  int64_t late_here() const { return late_here_.load(); }
  int64_t sync_max_us() const { return sync_max_us_.load(); }
  int64_t async_max_us() const { return async_max_us_.load(); }

 private:
  DecisionTally decisions_;
  std::atomic<int64_t> errors_{0};
  std::atomic<int64_t> late_here_{0};
  std::atomic<int64_t> sync_max_us_{0};
  std::atomic<int64_t> async_max_us_{0};
};

// How the RedisStore answered a call, as the client words its errors: whether the call may have
// reached Redis (answered, timed out, its connection lost) or was refused before it was sent.
enum class Outcome {
  kOk,
  kTimedOut,      // DEADLINE_EXCEEDED: it may have been applied
  kLost,          // UNAVAILABLE, its connection lost or replaced: it may have been applied
  kNotConnected,  // UNAVAILABLE at once, no connection: never sent
  kNotKeepingUp,  // UNAVAILABLE at once, over the pending bound: never sent
  // RESOURCE_EXHAUSTED: past half its time in this process's own queue (a stalled machine); it
  // may have been sent late, and applied
  kLateHere,
  kOtherError,
  kCount,
};

Outcome OutcomeOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return Outcome::kOk;
    case StatusCode::kDeadlineExceeded:
      return Outcome::kTimedOut;
    case StatusCode::kResourceExhausted:
      return Outcome::kLateHere;
    case StatusCode::kUnavailable:
      if (status.message().find("is not keeping up") != std::string::npos) {
        return Outcome::kNotKeepingUp;
      }
      if (status.message().starts_with("not connected to Redis")) return Outcome::kNotConnected;
      return Outcome::kLost;
    default:
      return Outcome::kOtherError;
  }
}

// The kPolicies index of a load's limiter (its name ends with the policy's); kPolicies.size() for
// any other scope (the probes).
size_t PolicyOfScope(std::string_view scope) {
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    if (scope.ends_with(FailurePolicyName(kPolicies[p]))) return p;
  }
  return kPolicies.size();
}

// Forwards to the RedisStore and counts its answers by Outcome, per policy, and the calls
// outstanding at it: what the ResilientStore above it sees of Redis.
class ObservedStore final : public Store {
 public:
  explicit ObservedStore(Store& backend) : backend_(backend) {}

  // Over every scope.
  int64_t answered(Outcome outcome) const {
    int64_t n = 0;
    for (size_t p = 0; p <= kPolicies.size(); ++p) n += answered(p, outcome);
    return n;
  }
  int64_t answered(size_t policy, Outcome outcome) const {
    return answered_[policy][static_cast<int>(outcome)].load();
  }
  // How the calls of a policy's rule failed: after they may have reached Redis (timed out,
  // connection lost), or refused at once (never sent).
  struct Failures {
    int64_t timed_out = 0, lost = 0, refused = 0;
    Failures operator-(const Failures& earlier) const {
      return {timed_out - earlier.timed_out, lost - earlier.lost, refused - earlier.refused};
    }
  };
  Failures failures(size_t policy) const {
    return {answered(policy, Outcome::kTimedOut) + answered(policy, Outcome::kLateHere),
            answered(policy, Outcome::kLost),
            answered(policy, Outcome::kNotConnected) + answered(policy, Outcome::kNotKeepingUp)};
  }
  int64_t max_outstanding() const { return max_outstanding_.load(); }

  uint32_t FailureDomain(std::string_view scope, std::string_view key) const override {
    return backend_.FailureDomain(scope, key);
  }
  std::string FailureDomainName(uint32_t domain) const override {
    return backend_.FailureDomainName(domain);
  }

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    RaiseTo(max_outstanding_, outstanding_ += static_cast<int64_t>(requests.size()));
    std::vector<size_t> policies;
    for (const auto& r : requests) policies.push_back(PolicyOfScope(r.scope));
    backend_.CheckBatchAsync(
        requests, [this, policies = std::move(policies), done = std::move(done)](auto results) {
          for (size_t i = 0; i < results.size(); ++i) Answered(policies[i], results[i].status());
          done(std::move(results));
        });
  }
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override {
    backend_.ResetAsync(scope, key, std::move(done));
  }
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override {
    backend_.CheckAllAsync(requests, std::move(done));
  }

 private:
  void Answered(size_t policy, const Status& status) {
    --outstanding_;
    ++answered_[policy][static_cast<int>(OutcomeOf(status))];
  }

  Store& backend_;
  std::atomic<int64_t> outstanding_{0};
  std::atomic<int64_t> max_outstanding_{0};
  std::atomic<int64_t> answered_[kPolicies.size() + 1][static_cast<int>(Outcome::kCount)] = {};
};

// sluice-bench-style clients over one limiter per policy and 2 * kKeys keys: kSyncThreads
// threads checking in a loop (1 ms between checks), and one thread issuing asynchronous checks
// at a steady kAsyncPerMillisecond, at most kMaxOutstanding outstanding. Each decision is timed
// from the call to its answer.
class Load {
 public:
  static constexpr int kKeys = 1000;  // for each of the two kinds of client
  static std::string SyncKey(int n) { return "k" + std::to_string(n % kKeys); }
  static std::string AsyncKey(int64_t n) { return "a" + std::to_string(n % kKeys); }
  // Every key a load checks, under each limiter.
  static std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    for (int n = 0; n < kKeys; ++n) {
      keys.push_back(SyncKey(n));
      keys.push_back(AsyncKey(n));
    }
    return keys;
  }

  explicit Load(const std::vector<std::unique_ptr<Limiter>>& limiters) : limiters_(limiters) {
    for (int t = 0; t < kSyncThreads; ++t) {
      threads_.emplace_back([this, t] {
        for (int i = 0; !stop_.load() && i < 2'000'000; ++i) {
          const size_t policy = static_cast<size_t>(t + i) % kPolicies.size();
          const std::string key = SyncKey(t * 7919 + i);
          const auto start = Steady::now();
          auto d = limiters_[policy]->Check(key);
          tally_.Add(policy, d, Steady::now() - start, /*async=*/false);
          ++progress_[t];
          std::this_thread::sleep_for(1ms);  // a steady load, not a spin
        }
      });
    }
    threads_.emplace_back([this] {
      auto tick = Steady::now();
      for (int64_t i = 0; !stop_.load() && i < 20'000'000;) {
        for (int n = 0; n < kAsyncPerMillisecond && outstanding_.load() < kMaxOutstanding;
             ++n, ++i) {
          const size_t policy = static_cast<size_t>(i) % kPolicies.size();
          const std::string key = AsyncKey(i);
          RaiseTo(max_outstanding_, ++outstanding_);
          const auto start = Steady::now();
          limiters_[policy]->CheckAsync(key, 1, [this, policy, start](Result<Decision> d) {
            tally_.Add(policy, d, Steady::now() - start, /*async=*/true);
            --outstanding_;
          });
        }
        tick += 1ms;
        std::this_thread::sleep_until(tick);
      }
    });
  }

  // Stops issuing checks and waits (up to 2 s) for every outstanding one to be answered; false if
  // some never are. A load that is not drained aborts when destroyed: its callbacks refer to it.
  bool Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    for (int i = 0; i < 2000 && outstanding_.load() > 0; ++i) std::this_thread::sleep_for(1ms);
    return outstanding_.load() == 0;
  }
  ~Load() {
    if (!Stop()) {
      std::fprintf(stderr, "%ld asynchronous checks never answered\n",
                   static_cast<long>(outstanding_.load()));
      std::abort();
    }
  }

  const Tally& tally() const { return tally_; }
  int64_t max_outstanding() const { return max_outstanding_.load(); }
  std::array<int64_t, kSyncThreads> progress() const {
    std::array<int64_t, kSyncThreads> p;
    for (int t = 0; t < kSyncThreads; ++t) p[t] = progress_[t].load();
    return p;
  }

 private:
  const std::vector<std::unique_ptr<Limiter>>& limiters_;
  Tally tally_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> outstanding_{0};
  std::atomic<int64_t> max_outstanding_{0};
  std::atomic<int64_t> progress_[kSyncThreads] = {};
  std::vector<std::thread> threads_;
};

// A fault, and whether the store speaks TLS to Redis.
using FaultOverTransport = std::tuple<RedisFault, bool>;

class FaultTest : public ::testing::TestWithParam<FaultOverTransport> {
 protected:
  RedisFault Fault() const { return std::get<0>(GetParam()); }
  bool OverTls() const { return std::get<1>(GetParam()); }
  virtual size_t MaxPending() const { return MaxPendingPerConnection(Fault()); }

  void SetUp() override {
    RedisTlsOptions tls;
    if (OverTls()) {
      ca_ = testing::CertificateAuthority::Create();
      ASSERT_NE(ca_, nullptr);
      const testing::IssuedCertificate certificate = ca_->Issue("localhost", {"IP:127.0.0.1"});
      server_ = testing::RedisServer::StartTls({.cert_file = certificate.cert_file,
                                                .key_file = certificate.key_file,
                                                .ca_file = ca_->ca_file()});
      tls.ca_file = ca_->ca_file();
    } else {
      server_ = testing::RedisServer::Start();
    }
    ASSERT_NE(server_, nullptr);
    injector_ = testing::FaultInjector::Create(*server_, Fault());
    ASSERT_NE(injector_, nullptr);
    // The injector's proxy (the slowed network) is in front of the plain port only.
    const std::string url =
        OverTls() ? server_->tls_url() : "redis://127.0.0.1:" + std::to_string(injector_->port());
    auto store = RedisStore::Create(RedisStoreOptions{.url = url,
                                                      .max_pending_per_connection = MaxPending(),
                                                      .key_prefix = "fault:",
                                                      .tls = tls});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    redis_ = std::move(store).value();
    observed_ = std::make_unique<ObservedStore>(*redis_);
    // The defaults: failures_to_open, open_for, the hot-key cache. `instances` is the
    // deployment's, for local_fallback's share of each limit.
    resilient_ =
        std::make_unique<ResilientStore>(*observed_, ResilientStoreOptions{.instances = 2});
    auto limit = Limit::Create(Algorithm::kGcra, 1'000'000, 1s);  // Redis always admits
    for (FailurePolicy policy : kPolicies) {
      limiters_.push_back(std::make_unique<Limiter>(
          *resilient_, std::string("load-") + FailurePolicyName(policy), *limit, policy));
    }
    // Connected before the load starts: a loaded machine can make the first connection (over
    // TLS, its handshake too) miss the connect deadline.
    ASSERT_TRUE(AwaitStore()) << "the store connects";
  }

  void TearDown() override {
    limiters_.clear();
    resilient_.reset();
    observed_.reset();
    redis_.reset();  // before the injector's proxy goes
    injector_.reset();
  }

  // Whether a probe of our own, on fresh keys every 5 ms, sees the store decide within 3 s.
  bool AwaitStore() {
    auto limit = Limit::Create(Algorithm::kGcra, 1'000'000, 1s);
    Limiter probe(*resilient_, "probe", *limit, FailurePolicy::kFailClosed);
    const auto start = Steady::now();
    for (int i = 0; i < 600 && Steady::now() - start < 3s; ++i) {
      auto d = probe.Check("probe-" + std::to_string(probes_++));
      if (d.ok() && d->source == DecisionSource::kStore) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

  // The units Redis holds as consumed for `scope` over the keys of a Load, under a limit that
  // never denies: what it applied. Read with peeks, 32 keys a round trip (within the lowest
  // pending bound).
  Result<int64_t> UnitsHeld(std::string_view scope, const Limit& limit) {
    const std::vector<std::string> keys = Load::Keys();
    int64_t held = 0;
    for (size_t first = 0; first < keys.size(); first += 32) {
      std::vector<CheckRequest> peeks;
      for (size_t i = first; i < std::min(keys.size(), first + 32); ++i) {
        peeks.push_back({.scope = scope, .limit = &limit, .key = keys[i], .cost = 0});
      }
      // A peek consumes nothing: one that misses its deadline on a loaded machine (each reads a
      // long log) is asked again.
      std::vector<Result<Decision>> decided;
      for (int attempt = 0; attempt < 5; ++attempt) {
        decided = redis_->CheckBatch(peeks);
        if (std::all_of(decided.begin(), decided.end(),
                        [](const Result<Decision>& d) { return d.ok(); })) {
          break;
        }
      }
      for (const Result<Decision>& d : decided) {
        if (!d.ok()) return d.status();
        held += limit.count() - d->remaining;
      }
    }
    return held;
  }

  // A fresh fixed window admits exactly its limit, every decision from Redis (or the hot-key
  // cache, which only denies). It starts once the store decides, in case a stall of this
  // machine since the recovery opened the breaker.
  void ExpectExactAfterRecovery() {
    ASSERT_TRUE(AwaitStore());
    auto limit = Limit::Create(Algorithm::kFixedWindow, 50, std::chrono::hours(1));
    Limiter exact(*resilient_, "exact", *limit, FailurePolicy::kFailClosed);
    std::atomic<int> admitted{0}, degraded{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 40; ++i) {
          auto d = exact.Check("fresh-window");
          if (!d.ok() || d->degraded()) {
            ++degraded;
          } else {
            admitted += d->allowed;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(admitted.load(), 50) << "exactly the limit, of 160 concurrent attempts";
    EXPECT_EQ(degraded.load(), 0);
  }

  std::unique_ptr<testing::CertificateAuthority> ca_;  // over TLS
  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<testing::FaultInjector> injector_;
  std::unique_ptr<RedisStore> redis_;
  std::unique_ptr<ObservedStore> observed_;
  std::unique_ptr<ResilientStore> resilient_;
  std::vector<std::unique_ptr<Limiter>> limiters_;  // one per kPolicies entry, in order
  int probes_ = 0;
};

TEST_P(FaultTest, DecidesWithinTheDeadlineByPolicyAndRecovers) {
  const RedisFault fault = Fault();
  testing::ResidentPeak memory(getpid());
  testing::StallWatch stalls;
  Load load(limiters_);
  std::this_thread::sleep_for(300ms);
  const size_t memory_before = memory.Restart();
  const DecisionCounts before = load.tally().Snapshot();
  const std::set<int64_t> clients_before = injector_->ClientIds();
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    EXPECT_GT(before.By(p, DecisionSource::kStore), 0) << "Redis decided before the fault";
  }

  const auto injected = Steady::now();
  ASSERT_TRUE(injector_->Inject());
  std::this_thread::sleep_for(400ms);
  const auto progress_mid = load.progress();
  std::this_thread::sleep_for(400ms);
  const auto progress_end = load.progress();
  const DecisionCounts during = load.tally().Snapshot() - before;
  ASSERT_TRUE(injector_->Clear());
  const auto cleared = Steady::now();

  const bool recovered = AwaitStore();
  const auto recovery = Steady::now() - cleared;
  const DecisionCounts recovered_at = load.tally().Snapshot();
  std::this_thread::sleep_for(300ms);
  const DecisionCounts after = load.tally().Snapshot() - recovered_at;
  const std::set<int64_t> clients_after = injector_->ClientIds();
  ASSERT_TRUE(load.Stop()) << "every asynchronous check was answered";
  const Tally& tally = load.tally();
  const size_t memory_peak = memory.peak();

  std::printf(
      "[%s] slowest decision %.1f ms sync, %.1f ms async (deadline %lld ms); during the %.0f ms "
      "of the fault: %s; Redis answered ok %ld, timed out %ld, connection lost %ld, refused at "
      "once: not connected %ld, not keeping up (over the pending bound) %ld, late in this "
      "process's queue %ld, other errors %ld; at most %ld outstanding at it (%ld async checks "
      "outstanding at most); back on Redis %.0f ms "
      "after the fault cleared; resident memory %zu "
      "MiB, peak +%zd KiB; CPU pressure %.0f%%, worst stall of this process %.1f ms\n",
      testing::RedisFaultName(fault), static_cast<double>(tally.sync_max_us()) / 1000,
      static_cast<double>(tally.async_max_us()) / 1000,
      static_cast<long long>(kDeadline.count() / 1000), Millis(cleared - injected),
      during.ToString().c_str(), static_cast<long>(observed_->answered(Outcome::kOk)),
      static_cast<long>(observed_->answered(Outcome::kTimedOut)),
      static_cast<long>(observed_->answered(Outcome::kLost)),
      static_cast<long>(observed_->answered(Outcome::kNotConnected)),
      static_cast<long>(observed_->answered(Outcome::kNotKeepingUp)),
      static_cast<long>(observed_->answered(Outcome::kLateHere)),
      static_cast<long>(observed_->answered(Outcome::kOtherError)),
      static_cast<long>(observed_->max_outstanding()), static_cast<long>(load.max_outstanding()),
      Millis(recovery), memory_before >> 20,
      (static_cast<ssize_t>(memory_peak) - static_cast<ssize_t>(memory_before)) / 1024,
      testing::CpuPressure(), Millis(stalls.worst()));

  EXPECT_EQ(tally.errors(), 0) << "every decision is made, by Redis or by the policy";
  const int64_t bound_us = Micros(kDeadline + kSlack + stalls.worst());
  EXPECT_LE(tally.sync_max_us(), bound_us);
  EXPECT_LE(tally.async_max_us(), bound_us);

  // A stall of the machine as long as half the deadline can time calls out, which the policy
  // then decides, whatever the fault, or keep them in this process past half their time, which
  // refuses them.
  const bool machine_stalled = stalls.worst() >= kDeadline / 2;
  if (!machine_stalled) {
    EXPECT_EQ(tally.late_here(), 0) << "a check is late in this process only on a stalled machine";
  }
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    const DecisionSource own = SourceOf(kPolicies[p]);
    for (FailurePolicy other : kPolicies) {
      if (SourceOf(other) != own) {
        EXPECT_EQ(during.By(p, SourceOf(other)), 0) << FailurePolicyName(kPolicies[p]);
      }
    }
    if (PolicyMustDecide(fault)) {
      EXPECT_GT(during.By(p, own), 0) << FailurePolicyName(kPolicies[p]) << " decided";
    }
    if (fault == RedisFault::kScriptsFlushed && !machine_stalled) {
      EXPECT_EQ(during.By(p, own), 0) << "NOSCRIPT is handled inside the client";
    }
    EXPECT_GT(after.By(p, DecisionSource::kStore), 0) << "the load is back on Redis";
  }
  const auto own_of = [&](FailurePolicy policy) {
    const size_t p = static_cast<size_t>(std::find(kPolicies.begin(), kPolicies.end(), policy) -
                                         kPolicies.begin());
    return std::pair(during.By(p, SourceOf(policy)), during.AllowedBy(p, SourceOf(policy)));
  };
  EXPECT_EQ(own_of(FailurePolicy::kFailOpen).second, own_of(FailurePolicy::kFailOpen).first);
  EXPECT_EQ(own_of(FailurePolicy::kFailClosed).second, 0);
  EXPECT_EQ(own_of(FailurePolicy::kLocalFallback).second,
            own_of(FailurePolicy::kLocalFallback).first)
      << "half of 1 000 000/s admits this load";
  if (fault == RedisFault::kScriptsFlushed) {  // a NOSCRIPT reaching the store is UNAVAILABLE
    for (Outcome o :
         {Outcome::kLost, Outcome::kNotConnected, Outcome::kNotKeepingUp, Outcome::kOtherError}) {
      EXPECT_EQ(observed_->answered(o), 0) << static_cast<int>(o);
    }
  }

  // Bounded queues: never more calls outstanding at Redis than the client's bound (and the
  // callers racing it); while Redis does not answer, the excess is refused at once, as Redis not
  // keeping up (UNAVAILABLE), which the policy decides.
  EXPECT_LE(observed_->max_outstanding(),
            static_cast<int64_t>(kConnections * MaxPending()) + kSyncThreads + 1);
  if (fault == RedisFault::kHung || fault == RedisFault::kSlowed) {
    EXPECT_GT(observed_->answered(Outcome::kNotKeepingUp), 0);
  }
  EXPECT_LT(memory_peak, memory_before + kMemoryBound) << "bounded memory";
  for (int t = 0; t < kSyncThreads; ++t) {
    EXPECT_GT(progress_end[t], progress_mid[t]) << "thread " << t << " is not stuck";
  }

  if (fault == RedisFault::kClientsKilled || fault == RedisFault::kFull) {
    EXPECT_EQ(clients_before.size(), static_cast<size_t>(kConnections));
    EXPECT_GE(injector_->killed(), static_cast<int64_t>(clients_before.size()));
    EXPECT_EQ(clients_after.size(), clients_before.size()) << "every connection came back";
    for (int64_t id : clients_after) EXPECT_EQ(clients_before.count(id), 0u) << "reconnected";
  }

  ASSERT_TRUE(recovered);
  EXPECT_LT(recovery, 1s);
  ExpectExactAfterRecovery();
}

// A call that fails after it may have reached Redis (it timed out, or its connection was lost)
// may still have been applied: its caller got the policy's decision (fail_closed: denied;
// fail_open, local_fallback: admitted) and its unit was spent at Redis all the same. Measured
// under the same load on sliding_log limits that never deny, so that what Redis holds for a key
// is what it applied: per policy, the units Redis holds afterwards minus the units the callers
// were told Redis admitted. That is never negative, and never more than the calls that failed
// after they may have been sent: a call refused at once (not connected, not keeping up) never
// reaches Redis. docs/failure-modes.md reports the figures. With the defaults throughout, the
// pending bound included, so that they are what a deployment with the defaults gets.
class FailedButAppliedTest : public FaultTest {
 protected:
  size_t MaxPending() const override { return RedisStoreOptions{}.max_pending_per_connection; }
};

TEST_P(FailedButAppliedTest, CountedPerPolicyAndBounded) {
  const RedisFault fault = Fault();
  auto limit =
      Limit::Create(Algorithm::kSlidingLog, Limit::kMaxSlidingLogCount, std::chrono::hours(1));
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  std::vector<std::unique_ptr<Limiter>> counted;  // one per kPolicies entry, in order
  for (FailurePolicy policy : kPolicies) {
    counted.push_back(std::make_unique<Limiter>(
        *resilient_, std::string("counted-") + FailurePolicyName(policy), *limit, policy));
  }
  Load load(counted);
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(injector_->Inject());
  std::this_thread::sleep_for(800ms);
  // kill -9 loses every key with the process: count from the restart, in an empty Redis.
  const bool restarts = fault == RedisFault::kKilled;
  const DecisionCounts decided_before = restarts ? load.tally().Snapshot() : DecisionCounts{};
  std::array<ObservedStore::Failures, kPolicies.size()> failed_before = {};
  for (size_t p = 0; restarts && p < kPolicies.size(); ++p) {
    failed_before[p] = observed_->failures(p);
  }
  ASSERT_TRUE(injector_->Clear());
  ASSERT_TRUE(AwaitStore());
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(load.Stop()) << "every asynchronous check was answered";
  // Calls still on their way to Redis (behind the proxy's delay) land well within this.
  std::this_thread::sleep_for(200ms);
  const DecisionCounts decided = load.tally().Snapshot() - decided_before;
  EXPECT_EQ(load.tally().errors(), 0);

  std::array<std::string, kPolicies.size()> scopes;
  std::array<int64_t, kPolicies.size()> held = {};
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    scopes[p] = std::string("counted-") + FailurePolicyName(kPolicies[p]);
    const Result<int64_t> units = UnitsHeld(scopes[p], *limit);
    ASSERT_TRUE(units.ok()) << units.status().ToString();
    held[p] = *units;
  }
  std::string figures;
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    const int64_t admitted = decided.AllowedBy(p, DecisionSource::kStore);
    const int64_t applied_unreported = held[p] - admitted;
    const ObservedStore::Failures failed = observed_->failures(p) - failed_before[p];
    figures += std::string(p == 0 ? "" : "; ") + FailurePolicyName(kPolicies[p]) +
               ": Redis holds " + std::to_string(held[p]) + " units, reported admitting " +
               std::to_string(admitted) + ", so " + std::to_string(applied_unreported) +
               " applied but reported failed, of " + std::to_string(failed.timed_out) +
               " timed out + " + std::to_string(failed.lost) + " connection lost (" +
               std::to_string(failed.refused) + " refused at once)";

    EXPECT_GT(admitted, 0) << scopes[p];
    EXPECT_GE(applied_unreported, 0) << scopes[p] << ": Redis holds what it reported admitting";
    EXPECT_LE(applied_unreported, failed.timed_out + failed.lost)
        << scopes[p] << ": only a call that may have reached Redis can have been applied";
  }
  std::printf("[%s] applied by Redis although reported failed%s: %s; CPU pressure %.0f%%\n",
              testing::RedisFaultName(fault), restarts ? " (since the restart)" : "",
              figures.c_str(), testing::CpuPressure());
  std::this_thread::sleep_for(100ms);
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    const Result<int64_t> units = UnitsHeld(scopes[p], *limit);
    ASSERT_TRUE(units.ok()) << units.status().ToString();
    EXPECT_EQ(*units, held[p]) << scopes[p] << ": nothing was still on its way to Redis";
  }
}

const auto kEachFault = ::testing::Combine(
    ::testing::Values(RedisFault::kKilled, RedisFault::kHung, RedisFault::kSlowed,
                      RedisFault::kScriptsFlushed, RedisFault::kClientsKilled, RedisFault::kFull),
    ::testing::Values(false));
// The slowed network is a proxy of plain TCP.
const auto kEachFaultOverTls = ::testing::Combine(
    ::testing::Values(RedisFault::kKilled, RedisFault::kHung, RedisFault::kScriptsFlushed,
                      RedisFault::kClientsKilled, RedisFault::kFull),
    ::testing::Values(true));
std::string FaultName(const ::testing::TestParamInfo<FaultOverTransport>& info) {
  return testing::RedisFaultName(std::get<0>(info.param));
}
INSTANTIATE_TEST_SUITE_P(EachFault, FaultTest, kEachFault, FaultName);
INSTANTIATE_TEST_SUITE_P(EachFault, FailedButAppliedTest, kEachFault, FaultName);
INSTANTIATE_TEST_SUITE_P(EachFaultOverTls, FaultTest, kEachFaultOverTls, FaultName);
INSTANTIATE_TEST_SUITE_P(EachFaultOverTls, FailedButAppliedTest, kEachFaultOverTls, FaultName);

}  // namespace
}  // namespace sluice
