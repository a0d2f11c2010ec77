#include "sluice/resilient_store.h"

#include <algorithm>
#include <boost/unordered/unordered_flat_map.hpp>
#include <mutex>
#include <string>

namespace sluice {
namespace {

int64_t Ticks(Time t) { return t.time_since_epoch().count(); }

// Errors that say the store could not decide, as opposed to a bad request.
bool IsStoreFailure(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kResourceExhausted || code == StatusCode::kInternal;
}

// scope and key in one string, the scope's length first so no two pairs collide. A per-thread
// buffer: the lookup on every decision allocates nothing.
std::string_view CacheKey(std::string_view scope, std::string_view key) {
  thread_local std::string composite;
  composite.clear();
  composite.push_back(static_cast<char>(scope.size()));
  composite.append(scope);
  composite.append(key);
  return composite;
}

struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// The limit one of `instances` processes may admit on its own.
Result<Limit> ShareOf(const Limit& limit, int64_t instances) {
  const auto share = [instances](int64_t v) { return std::max<int64_t>(1, v / instances); };
  return Limit::Create(
      limit.algorithm(), share(limit.count()), limit.period(),
      HasBurst(limit.algorithm()) ? std::optional(share(limit.capacity())) : std::nullopt);
}

}  // namespace

const char* BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

class ResilientStore::Breaker {
 public:
  Breaker(int failures_to_open, Duration open_for)
      : failures_to_open_(std::max(failures_to_open, 1)), open_for_(open_for.count()) {}

  // Whether a call may go to the backend now. Closed: always (one atomic load). Open: no, until
  // open_for has passed; then a single probe.
  bool Allow(int64_t now) {
    if (state_.load(std::memory_order_acquire) == BreakerState::kClosed) return true;
    std::lock_guard lock(mu_);
    if (state_ == BreakerState::kOpen && now - opened_at_ >= open_for_) {
      state_ = BreakerState::kHalfOpen;
      probing_ = false;
    }
    if (state_ == BreakerState::kHalfOpen && !probing_) {
      probing_ = true;
      return true;
    }
    return state_ == BreakerState::kClosed;
  }

  void Succeeded() {
    if (state_.load(std::memory_order_acquire) == BreakerState::kClosed &&
        failures_.load(std::memory_order_relaxed) == 0) {
      return;
    }
    std::lock_guard lock(mu_);
    failures_ = 0;
    probing_ = false;
    state_ = BreakerState::kClosed;
  }

  void Failed(int64_t now) {
    std::lock_guard lock(mu_);
    const int failures = failures_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (state_ == BreakerState::kHalfOpen ||
        (state_ == BreakerState::kClosed && failures >= failures_to_open_)) {
      state_ = BreakerState::kOpen;
      opened_at_ = now;
      probing_ = false;
      opens_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  BreakerState state() const { return state_.load(std::memory_order_acquire); }
  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }

 private:
  const int failures_to_open_;
  const int64_t open_for_;
  std::mutex mu_;
  std::atomic<BreakerState> state_{BreakerState::kClosed};
  std::atomic<int> failures_{0};
  std::atomic<uint64_t> opens_{0};
  int64_t opened_at_ = 0;
  bool probing_ = false;
};

// Keys the backend denied, each with the smallest cost denied and until when. Sharded; a full
// shard drops what expired, and if that is not enough, remembers nothing new.
class ResilientStore::HotKeys {
 public:
  explicit HotKeys(size_t capacity) : per_shard_(std::max<size_t>(capacity / kShards, 1)) {}

  std::optional<Decision> Deny(const CheckRequest& r, int64_t now) {
    const std::string_view key = CacheKey(r.scope, r.key);
    Shard& shard = ShardFor(key);
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return std::nullopt;
    const Entry& e = it->second;
    if (e.denied_until <= now) {
      shard.map.erase(it);
      return std::nullopt;
    }
    if (std::max<int64_t>(r.cost, 1) < e.units) return std::nullopt;  // a smaller request may fit
    return Decision{.allowed = false,
                    .limit = r.limit->count(),
                    .remaining = 0,
                    .retry_after = Duration(e.denied_until - now),
                    .reset_after = Duration(std::max(e.fresh_at, e.denied_until) - now),
                    .source = DecisionSource::kHotKeyCache};
  }

  void Remember(const CheckRequest& r, int64_t now, const Decision& denial) {
    std::string key(CacheKey(r.scope, r.key));
    Shard& shard = ShardFor(key);
    const Entry entry{.units = std::max<int64_t>(r.cost, 1),
                      .denied_until = now + denial.retry_after.count(),
                      .fresh_at = now + denial.reset_after.count()};
    std::lock_guard lock(shard.mu);
    if (shard.map.size() >= per_shard_ && !shard.map.contains(key)) {
      boost::unordered::erase_if(shard.map,
                                 [now](const auto& kv) { return kv.second.denied_until <= now; });
      if (shard.map.size() >= per_shard_) return;
    }
    shard.map.insert_or_assign(std::move(key), entry);
  }

  void Forget(std::string_view scope, std::string_view key) {
    const std::string_view composite = CacheKey(scope, key);
    Shard& shard = ShardFor(composite);
    std::lock_guard lock(shard.mu);
    if (auto it = shard.map.find(composite); it != shard.map.end()) shard.map.erase(it);
  }

 private:
  static constexpr size_t kShards = 16;
  struct Entry {
    int64_t units;         // the smallest request denied
    int64_t denied_until;  // when that request would pass
    int64_t fresh_at;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    boost::unordered_flat_map<std::string, Entry, KeyHash, std::equal_to<>> map;
  };
  Shard& ShardFor(std::string_view key) { return shards_[KeyHash{}(key) % kShards]; }

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
      breaker_(std::make_unique<Breaker>(options.failures_to_open, options.open_for)),
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

bool ResilientStore::Observe(const Result<Decision>& answer) {
  if (answer.ok()) {
    breaker_->Succeeded();
    return false;
  }
  if (!IsStoreFailure(answer.status().code())) return false;
  store_errors_.fetch_add(1, std::memory_order_relaxed);
  breaker_->Failed(Now());
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

Result<Decision> ResilientStore::Settle(const CheckRequest& request, Result<Decision> answer) {
  Result<Decision> result = std::move(answer);
  if (Observe(result)) {
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
  if (!breaker_->Allow(now)) {
    Result<Decision> decided = ApplyPolicy(request);
    Count(decided);
    return decided;
  }
  return Settle(request, backend_.Check(request));
}

void ResilientStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  struct Batch {
    std::vector<Result<Decision>> results;
    std::vector<size_t> sent_index;
    std::vector<OwnedRequest> sent;
  };
  auto batch = std::make_shared<Batch>();
  batch->results.reserve(requests.size());
  const int64_t now = Now();
  bool backend_allowed = true, asked = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (auto cached = FromCache(requests[i], now)) {
      Count(*cached);
      batch->results.emplace_back(*cached);
      continue;
    }
    if (!asked) {
      backend_allowed = breaker_->Allow(now);
      asked = true;
    }
    if (!backend_allowed) {
      batch->results.push_back(ApplyPolicy(requests[i]));
      Count(batch->results.back());
      continue;
    }
    batch->results.emplace_back(Status::Internal("not decided"));
    batch->sent_index.push_back(i);
    batch->sent.emplace_back(requests[i]);
  }
  if (batch->sent.empty()) return done(std::move(batch->results));
  std::vector<CheckRequest> views;
  views.reserve(batch->sent.size());
  for (const auto& r : batch->sent) views.push_back(r.View());
  backend_.CheckBatchAsync(views, [this, batch, done = std::move(done)](auto answers) {
    for (size_t k = 0; k < answers.size(); ++k) {
      batch->results[batch->sent_index[k]] = Settle(batch->sent[k].View(), std::move(answers[k]));
    }
    done(std::move(batch->results));
  });
}

void ResilientStore::ProbeAsync(const CheckRequest& probe, DecisionCallback done) {
  if (!breaker_->Allow(Now())) {
    return done(Status::Unavailable("circuit breaker open: the store failed repeatedly"));
  }
  backend_.CheckAsync(probe, [this, done = std::move(done)](Result<Decision> answer) {
    Observe(answer);
    done(std::move(answer));
  });
}

Status ResilientStore::DoReset(std::string_view scope, std::string_view key) {
  if (hot_keys_) hot_keys_->Forget(scope, key);
  (void)fallback_.Reset(scope, key);
  return backend_.Reset(scope, key);
}

void ResilientStore::DoResetAsync(std::string_view scope, std::string_view key,
                                  StatusCallback done) {
  if (hot_keys_) hot_keys_->Forget(scope, key);
  (void)fallback_.Reset(scope, key);
  backend_.ResetAsync(scope, key, std::move(done));
}

ResilientStoreStats ResilientStore::stats() const {
  const auto n = [this](DecisionSource s) { return by_source_[static_cast<size_t>(s)].load(); };
  return ResilientStoreStats{.store = n(DecisionSource::kStore),
                             .hot_key_cache = n(DecisionSource::kHotKeyCache),
                             .fail_open = n(DecisionSource::kFailOpen),
                             .fail_closed = n(DecisionSource::kFailClosed),
                             .local_fallback = n(DecisionSource::kLocalFallback),
                             .store_errors = store_errors_.load(),
                             .breaker_opens = breaker_->opens(),
                             .breaker = breaker_->state()};
}

BreakerState ResilientStore::breaker_state() const { return breaker_->state(); }

}  // namespace sluice
