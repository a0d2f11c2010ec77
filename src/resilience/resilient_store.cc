#include "sluice/resilient_store.h"

#include <algorithm>
#include <boost/unordered/unordered_flat_map.hpp>
#include <string>

#include "core/composite_key.h"
#include "core/mutex.h"

namespace sluice {
namespace {

int64_t Ticks(Time t) { return t.time_since_epoch().count(); }

// How bad a breaker state is, for the worst over the domains.
int Severity(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return 0;
    case BreakerState::kHalfOpen:
      return 1;
    case BreakerState::kOpen:
      return 2;
  }
  return 2;
}

BreakerState Worst(BreakerState a, BreakerState b) { return Severity(a) >= Severity(b) ? a : b; }

// The limit one of `instances` processes may admit on its own.
Result<Limit> ShareOf(const Limit& limit, int64_t instances) {
  const auto share = [instances](int64_t v) { return std::max<int64_t>(1, v / instances); };
  return Limit::Create(
      limit.algorithm(), share(limit.count()), limit.period(),
      IsMeter(limit.algorithm()) ? std::optional(share(limit.capacity())) : std::nullopt);
}

}  // namespace

// What a breaker said to one call: whether it may go to the backend, and what its answer may
// change. Only an answer to a call sent since the breaker last opened tells of the backend as it
// is now: one sent before (slow, or queued) says nothing of whether it recovered.
struct ResilientStore::Pass {
  uint32_t domain = 0;
  bool allowed = false;
  bool probe = false;  // the one call a half-open breaker lets through
  uint64_t epoch = 0;  // the breaker's opens when the call was let through
};

// One failure domain's breaker. It starts unused, and the first call that asks it records its
// domain (for stats) on the way to closed; from then on, the closed state's Allow is two atomic
// loads.
class ResilientStore::Breaker {
 public:
  // Whether a call may go to the backend now. Closed: always. Open: no, until open_for has
  // passed; then a single probe at a time.
  Pass Allow(int64_t now, int64_t open_for, uint32_t domain) {
    // The epoch before the phase: if the breaker opens in between, the call counts as sent
    // before it did.
    const uint64_t epoch = opens_.load(std::memory_order_acquire);
    if (phase_.load(std::memory_order_acquire) == Phase::kClosed) {
      return {.domain = domain, .allowed = true, .epoch = epoch};
    }
    core::MutexLock lock(mu_);
    const uint64_t current = opens_.load(std::memory_order_relaxed);
    if (phase_ == Phase::kUnused) {
      domain_ = domain;
      phase_ = Phase::kClosed;
    }
    if (phase_ == Phase::kOpen && now - opened_at_ >= open_for) {
      phase_ = Phase::kHalfOpen;
      probing_ = false;
    }
    if (phase_ == Phase::kHalfOpen && !probing_) {
      probing_ = true;
      return {.domain = domain, .allowed = true, .probe = true, .epoch = current};
    }
    return {.domain = domain, .allowed = phase_ == Phase::kClosed, .epoch = current};
  }

  // Only the probe closes an open breaker: a success of a call sent before it opened must not
  // skip the probe.
  void Succeeded(const Pass& pass) {
    if (phase_.load(std::memory_order_acquire) == Phase::kClosed &&
        failures_.load(std::memory_order_relaxed) == 0) {
      return;
    }
    core::MutexLock lock(mu_);
    if (!Current(pass)) return;
    if (phase_ == Phase::kClosed || (phase_ == Phase::kHalfOpen && pass.probe)) {
      failures_ = 0;
      probing_ = false;
      phase_ = Phase::kClosed;
    }
  }

  void Failed(const Pass& pass, int64_t now, int failures_to_open) {
    core::MutexLock lock(mu_);
    if (!Current(pass)) return;
    const bool probe_failed = phase_ == Phase::kHalfOpen && pass.probe;
    const bool too_many = phase_ == Phase::kClosed &&
                          failures_.fetch_add(1, std::memory_order_relaxed) + 1 >= failures_to_open;
    if (probe_failed || too_many) {
      phase_ = Phase::kOpen;
      opened_at_ = now;
      probing_ = false;
      failures_ = 0;
      opens_.fetch_add(1, std::memory_order_release);
    }
  }

  // An answer that says nothing of the backend's health (a bad request, a full store, a script
  // error): a probe it answered lets the next call probe instead.
  void Released(const Pass& pass) {
    if (!pass.probe) return;
    core::MutexLock lock(mu_);
    if (Current(pass) && phase_ == Phase::kHalfOpen) probing_ = false;
  }

  bool used() const { return phase_.load(std::memory_order_acquire) != Phase::kUnused; }
  uint32_t domain() const {
    core::MutexLock lock(mu_);
    return domain_;
  }
  BreakerState state() const {
    switch (phase_.load(std::memory_order_acquire)) {
      case Phase::kOpen:
        return BreakerState::kOpen;
      case Phase::kHalfOpen:
        return BreakerState::kHalfOpen;
      case Phase::kUnused:
      case Phase::kClosed:
        break;
    }
    return BreakerState::kClosed;
  }
  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }

 private:
  enum class Phase : uint8_t { kUnused, kClosed, kOpen, kHalfOpen };

  // Whether the call was let through since the breaker last opened.
  bool Current(const Pass& pass) const REQUIRES(mu_) {
    return pass.epoch == opens_.load(std::memory_order_relaxed);
  }

  // The atomics are read without the lock on the fast paths, and written under it.
  mutable core::Mutex mu_;
  std::atomic<Phase> phase_{Phase::kUnused};
  std::atomic<int> failures_{0};
  std::atomic<uint64_t> opens_{0};
  int64_t opened_at_ GUARDED_BY(mu_) = 0;
  bool probing_ GUARDED_BY(mu_) = false;
  uint32_t domain_ GUARDED_BY(mu_) = 0;
};

// Keys the backend denied, each with the limit and the cost of the request denied and until
// when. Sharded; a full shard drops what expired, at most once per kFullSweepIntervalUs, and
// otherwise remembers nothing new.
class ResilientStore::HotKeys {
 public:
  explicit HotKeys(size_t capacity) : per_shard_(std::max<size_t>(capacity / kShards, 1)) {}

  // Only a request of the cost denied: a smaller one may fit, and a larger one's retry_after is
  // later.
  std::optional<Decision> Deny(const CheckRequest& r, int64_t now) {
    const core::HashedKey key = core::Hashed(core::ComposeKey(r.scope, r.key));
    Shard& shard = ShardFor(key);
    core::MutexLock lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return std::nullopt;
    const Entry& e = it->second;
    if (e.denied_until <= now || e.limit != *r.limit) {  // passed, or the rule changed since
      shard.map.erase(it);
      return std::nullopt;
    }
    if (r.cost != e.cost) return std::nullopt;
    return Decision{.allowed = false,
                    .limit = r.limit->count(),
                    .remaining = e.remaining,
                    .retry_after = Duration(e.denied_until - now),
                    .reset_after = Duration(std::max(e.fresh_at, e.denied_until) - now),
                    .replenish_after = Duration(std::max<int64_t>(e.replenish_at - now, 0)),
                    .source = DecisionSource::kHotKeyCache};
  }

  void Remember(const CheckRequest& r, int64_t now, const Decision& denial) {
    const core::HashedKey key = core::Hashed(core::ComposeKey(r.scope, r.key));
    Shard& shard = ShardFor(key);
    const Entry entry{.limit = *r.limit,
                      .cost = r.cost,
                      .denied_until = now + denial.retry_after.count(),
                      .fresh_at = now + denial.reset_after.count(),
                      .remaining = denial.remaining,
                      .replenish_at = now + denial.replenish_after.count()};
    core::MutexLock lock(shard.mu);
    if (auto it = shard.map.find(key); it != shard.map.end()) {
      it->second = entry;
      return;
    }
    if (shard.map.size() >= per_shard_ && !shard.SweptRoom(now, per_shard_)) return;
    shard.map.emplace(std::string(key.key), entry);
  }

  void Forget(std::string_view scope, std::string_view key) {
    const core::HashedKey composite = core::Hashed(core::ComposeKey(scope, key));
    Shard& shard = ShardFor(composite);
    core::MutexLock lock(shard.mu);
    if (auto it = shard.map.find(composite); it != shard.map.end()) shard.map.erase(it);
  }

 private:
  static constexpr size_t kShards = 16;
  // A full shard is swept (O(n), under its lock, on the thread that got the denial: a Redis I/O
  // thread) at most this often; sooner, it would find too little to be worth it.
  static constexpr int64_t kFullSweepIntervalUs = 10'000;

  struct Entry {
    Limit limit;  // the one the denial was made under
    int64_t cost;
    int64_t denied_until;  // when that request would pass
    int64_t fresh_at;
    // What the denial said remained, and when more would: other traffic can only lower it, so
    // it stays an upper bound while the entry lives.
    int64_t remaining;
    int64_t replenish_at;
  };
  struct alignas(64) Shard {
    core::Mutex mu;
    boost::unordered_flat_map<std::string, Entry, core::KeyHash, core::KeyEqual> map GUARDED_BY(mu);
    int64_t last_sweep GUARDED_BY(mu) = -kFullSweepIntervalUs;

    // Drops what expired, unless the last sweep was too recent; true if that made room.
    bool SweptRoom(int64_t now, size_t bound) REQUIRES(mu) {
      if (now - last_sweep < kFullSweepIntervalUs) return false;
      last_sweep = now;
      boost::unordered::erase_if(map,
                                 [now](const auto& kv) { return kv.second.denied_until <= now; });
      return map.size() < bound;
    }
  };
  Shard& ShardFor(const core::HashedKey& key) {
    return shards_[core::ShardIndex(key.hash, kShards)];
  }

  const size_t per_shard_;
  Shard shards_[kShards];
};

// A request whose strings and limit outlive the caller's, for the asynchronous path.
struct ResilientStore::OwnedRequest {
  std::string scope, key;
  Limit limit;
  int64_t cost;
  FailurePolicy on_error;
  Duration max_delay;

  explicit OwnedRequest(const CheckRequest& r)
      : scope(r.scope),
        key(r.key),
        limit(*r.limit),
        cost(r.cost),
        on_error(r.on_error),
        max_delay(r.max_delay) {}
  CheckRequest View() const {
    return {.scope = scope,
            .limit = &limit,
            .key = key,
            .cost = cost,
            .on_error = on_error,
            .max_delay = max_delay};
  }
};

ResilientStore::ResilientStore(Store& backend, ResilientStoreOptions options)
    : backend_(backend),
      options_(options),
      clock_(options.clock ? *options.clock : SystemClock::Instance()),
      breakers_(std::make_unique<Breaker[]>(kBreakerSlots)),
      hot_keys_(options.hot_key_capacity > 0 ? std::make_unique<HotKeys>(options.hot_key_capacity)
                                             : nullptr),
      fallback_(MemoryStoreOptions{.clock = &clock_, .max_keys = options.fallback_max_keys}) {}

ResilientStore::~ResilientStore() = default;

int64_t ResilientStore::Now() const { return Ticks(clock_.now()); }

// A reservation neither reads nor fills the cache: its denials are for requests that could not
// wait, and one that can may be booked.
bool ResilientStore::UsesCache(const CheckRequest& request) const {
  return hot_keys_ && request.max_delay.count() == 0;
}

std::optional<Decision> ResilientStore::FromCache(const CheckRequest& request, int64_t now) {
  if (!UsesCache(request)) return std::nullopt;
  return hot_keys_->Deny(request, now);
}

ResilientStore::Breaker& ResilientStore::BreakerOf(uint32_t domain) {
  return breakers_[domain % kBreakerSlots];
}

ResilientStore::Pass ResilientStore::Allow(std::string_view scope, std::string_view key,
                                           int64_t now) {
  const uint32_t domain = backend_.FailureDomain(scope, key);
  return BreakerOf(domain).Allow(now, options_.open_for.count(), domain);
}

bool ResilientStore::Observe(const Pass& pass, const Result<Decision>& answer) {
  Breaker& breaker = BreakerOf(pass.domain);
  if (answer.ok()) {
    breaker.Succeeded(pass);
    return false;
  }
  if (!IsStoreOutage(answer.status())) {
    breaker.Released(pass);
    return false;
  }
  store_errors_.fetch_add(1, std::memory_order_relaxed);
  breaker.Failed(pass, Now(), std::max(options_.failures_to_open, 1));
  return true;
}

void ResilientStore::Count(const Result<Decision>& result) {
  if (result.ok()) by_source_[static_cast<size_t>(result->source)].fetch_add(1);
}

Result<Decision> ResilientStore::ApplyPolicy(const CheckRequest& request) {
  const Limit& limit = *request.limit;
  const Decision open{.allowed = true, .limit = limit.count(), .source = DecisionSource::kFailOpen};
  const Decision closed{.allowed = false,
                        .limit = limit.count(),
                        .retry_after = options_.open_for,
                        .source = DecisionSource::kFailClosed};
  switch (request.on_error) {
    case FailurePolicy::kFailOpen:
      return open;
    case FailurePolicy::kFailClosed:
      return closed;
    case FailurePolicy::kLocalFallback:
      break;
  }
  Result<Decision> local = Status::Internal("no local limit");
  if (auto share = ShareOf(limit, options_.instances); share.ok()) {
    CheckRequest shared = request;
    shared.limit = &*share;
    shared.max_delay = std::min(request.max_delay, MaxDelayOf(*share));
    local = fallback_.Check(shared);
  }
  Decision decided = local.ok() ? *local : closed;  // a cost above the local share never fits
  decided.limit = limit.count();
  decided.source = DecisionSource::kLocalFallback;
  return decided;
}

Result<Decision> ResilientStore::Settle(const CheckRequest& request, const Pass& pass,
                                        Result<Decision> answer) {
  Result<Decision> result = std::move(answer);
  if (Observe(pass, result)) {
    result = ApplyPolicy(request);
  } else if (result.ok() && !result->allowed && UsesCache(request)) {
    hot_keys_->Remember(request, Now(), *result);
  }
  Count(result);
  return result;
}

Result<Decision> ResilientStore::DoCheck(const CheckRequest& request) {
  const int64_t now = Now();
  if (auto cached = FromCache(request, now)) {
    Count(*cached);
    return *cached;
  }
  const Pass pass = Allow(request.scope, request.key, now);
  if (!pass.allowed) {
    Result<Decision> decided = ApplyPolicy(request);
    Count(decided);
    return decided;
  }
  return Settle(request, pass, backend_.Check(request));
}

void ResilientStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  struct Call {
    std::vector<OwnedRequest> requests;
    std::vector<Pass> passes;
    std::vector<CheckRequest> Views() const {
      std::vector<CheckRequest> views;
      views.reserve(requests.size());
      for (const auto& r : requests) views.push_back(r.View());
      return views;
    }
  };
  auto call = std::make_shared<Call>();
  const int64_t now = Now();
  bool through = true;
  for (const CheckRequest& r : requests) {
    call->requests.emplace_back(r);
    call->passes.push_back(Allow(r.scope, r.key, now));
    through = through && call->passes.back().allowed;
  }
  const auto settle = [this, call](const Result<std::vector<Decision>>& answer) {
    const Result<Decision> outcome =
        answer.ok() ? Result<Decision>(Decision{}) : Result<Decision>(answer.status());
    bool outage = false;
    for (const Pass& pass : call->passes) outage = Observe(pass, outcome) || outage;
    return outage;
  };
  if (!through) {
    // Nothing sent: the passes that a breaker let through give their probe slot back.
    for (const Pass& pass : call->passes) {
      if (pass.allowed) BreakerOf(pass.domain).Released(pass);
    }
    return done(DecideAllByPolicy(call->Views()));
  }
  const std::vector<CheckRequest> views = call->Views();
  backend_.CheckAllAsync(views, [this, call, settle, done = std::move(done)](auto answer) {
    if (settle(answer)) return done(DecideAllByPolicy(call->Views()));
    if (answer.ok()) {
      for (const Decision& d : *answer) Count(d);
    }
    done(std::move(answer));
  });
}

std::vector<Decision> ResilientStore::DecideAllByPolicy(std::span<const CheckRequest> requests) {
  bool admitted = std::none_of(requests.begin(), requests.end(), [](const CheckRequest& r) {
    return r.on_error == FailurePolicy::kFailClosed;
  });
  // The local fallback's answer for each local_fallback request, in order.
  std::vector<Limit> shares;
  std::vector<CheckRequest> local;
  shares.reserve(requests.size());
  for (const CheckRequest& r : requests) {
    if (r.on_error != FailurePolicy::kLocalFallback) continue;
    auto share = ShareOf(*r.limit, options_.instances);
    if (!share.ok()) {
      admitted = false;
      break;
    }
    shares.push_back(*share);
    local.push_back(r);
    local.back().limit = &shares.back();
  }
  std::vector<Decision> local_decisions;
  if (admitted && !local.empty()) {
    auto decided = fallback_.CheckAll(local);  // a cost above a share never fits: denied
    if (decided.ok()) local_decisions = std::move(*decided);
    admitted = decided.ok() && std::all_of(local_decisions.begin(), local_decisions.end(),
                                           [](const Decision& d) { return d.allowed; });
  }
  std::vector<Decision> decisions;
  decisions.reserve(requests.size());
  size_t next_local = 0;
  for (const CheckRequest& r : requests) {
    Decision d{.allowed = admitted, .limit = r.limit->count()};
    switch (r.on_error) {
      case FailurePolicy::kFailOpen:
        d.source = DecisionSource::kFailOpen;
        break;
      case FailurePolicy::kFailClosed:
        d.source = DecisionSource::kFailClosed;
        d.retry_after = options_.open_for;
        break;
      case FailurePolicy::kLocalFallback:
        if (next_local < local_decisions.size()) d = local_decisions[next_local++];
        d.limit = r.limit->count();
        d.source = DecisionSource::kLocalFallback;
        if (d.allowed != admitted) {  // another request refused: report what a peek sees
          d.allowed = false;
          d.retry_after = Duration(0);
        }
        if (local_decisions.empty() && !admitted) d.retry_after = options_.open_for;
        break;
    }
    Count(d);
    decisions.push_back(d);
  }
  return decisions;
}

void ResilientStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  struct Batch {
    std::vector<Result<Decision>> results;
    std::vector<size_t> sent_index;
    std::vector<Pass> sent_pass;
    std::vector<OwnedRequest> sent;
  };
  auto batch = std::make_shared<Batch>();
  batch->results.reserve(requests.size());
  const int64_t now = Now();
  for (size_t i = 0; i < requests.size(); ++i) {
    if (auto cached = FromCache(requests[i], now)) {
      Count(*cached);
      batch->results.emplace_back(*cached);
      continue;
    }
    const Pass pass = Allow(requests[i].scope, requests[i].key, now);
    if (!pass.allowed) {
      batch->results.push_back(ApplyPolicy(requests[i]));
      Count(batch->results.back());
      continue;
    }
    batch->results.emplace_back(Status::Internal("not decided"));
    batch->sent_index.push_back(i);
    batch->sent_pass.push_back(pass);
    batch->sent.emplace_back(requests[i]);
  }
  if (batch->sent.empty()) return done(std::move(batch->results));
  std::vector<CheckRequest> views;
  views.reserve(batch->sent.size());
  for (const auto& r : batch->sent) views.push_back(r.View());
  backend_.CheckBatchAsync(views, [this, batch, done = std::move(done)](auto answers) {
    for (size_t k = 0; k < answers.size(); ++k) {
      batch->results[batch->sent_index[k]] =
          Settle(batch->sent[k].View(), batch->sent_pass[k], std::move(answers[k]));
    }
    done(std::move(batch->results));
  });
}

void ResilientStore::ProbeAsync(DecisionCallback done) {
  ProbeAsync(ReadinessProbe(), std::move(done));
}

void ResilientStore::ProbeAsync(const CheckRequest& probe, DecisionCallback done) {
  const Pass pass = Allow(probe.scope, probe.key, Now());
  if (!pass.allowed) {
    return done(Status::Unavailable("circuit breaker open: the store failed repeatedly"));
  }
  backend_.CheckAsync(probe, [this, pass, done = std::move(done)](Result<Decision> answer) {
    Observe(pass, answer);
    done(std::move(answer));
  });
}

Status ResilientStore::DoReset(std::string_view scope, std::string_view key) {
  if (hot_keys_) hot_keys_->Forget(scope, key);
  // Best effort: the local fallback's state is this process's estimate, and the backend's answer
  // is the reset's.
  (void)fallback_.Reset(scope, key);
  return backend_.Reset(scope, key);
}

void ResilientStore::DoResetAsync(std::string_view scope, std::string_view key,
                                  StatusCallback done) {
  if (hot_keys_) hot_keys_->Forget(scope, key);
  (void)fallback_.Reset(scope, key);  // best effort, as in DoReset
  backend_.ResetAsync(scope, key, std::move(done));
}

uint32_t ResilientStore::FailureDomain(std::string_view scope, std::string_view key) const {
  return backend_.FailureDomain(scope, key);
}

std::string ResilientStore::FailureDomainName(uint32_t domain) const {
  return backend_.FailureDomainName(domain);
}

StoreHealthStats ResilientStore::stats() const {
  const auto n = [this](DecisionSource s) { return by_source_[static_cast<size_t>(s)].load(); };
  StoreHealthStats stats;
  stats.store = n(DecisionSource::kStore);
  stats.hot_key_cache = n(DecisionSource::kHotKeyCache);
  stats.fail_open = n(DecisionSource::kFailOpen);
  stats.fail_closed = n(DecisionSource::kFailClosed);
  stats.local_fallback = n(DecisionSource::kLocalFallback);
  stats.store_errors = store_errors_.load();
  for (size_t i = 0; i < kBreakerSlots; ++i) {
    const Breaker& breaker = breakers_[i];
    const uint64_t opens = breaker.opens();
    const BreakerState state = breaker.state();
    stats.breaker_opens += opens;
    stats.breaker = Worst(stats.breaker, state);
    if (breaker.used()) {
      stats.breakers.push_back(
          {.domain = backend_.FailureDomainName(breaker.domain()), .state = state, .opens = opens});
    }
  }
  return stats;
}

BreakerState ResilientStore::breaker_state() const {
  BreakerState worst = BreakerState::kClosed;
  for (size_t i = 0; i < kBreakerSlots; ++i) worst = Worst(worst, breakers_[i].state());
  return worst;
}

}  // namespace sluice
