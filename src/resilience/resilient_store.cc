#include "sluice/resilient_store.h"

#include <algorithm>
#include <string>
#include <vector>

#include "resilience/breaker.h"
#include "resilience/failure_policy.h"
#include "resilience/hot_key_cache.h"

namespace sluice {
namespace {

using resilience::BreakerPass;

static_assert(ResilientStore::kBreakerSlots == resilience::DomainBreakers::kSlots);

// A request whose strings and limit outlive the caller's, for the asynchronous paths.
struct OwnedRequest {
  std::string scope, key;
  Limit limit;
  int64_t cost;
  FailurePolicy on_error;
  Duration max_delay;
  LeaseTerms lease;

  explicit OwnedRequest(const CheckRequest& r)
      : scope(r.scope),
        key(r.key),
        limit(*r.limit),
        cost(r.cost),
        on_error(r.on_error),
        max_delay(r.max_delay),
        lease(r.lease) {}
  CheckRequest View() const {
    return {.scope = scope,
            .limit = &limit,
            .key = key,
            .cost = cost,
            .on_error = on_error,
            .max_delay = max_delay,
            .lease = lease};
  }
};

std::vector<CheckRequest> Views(const std::vector<OwnedRequest>& requests) {
  std::vector<CheckRequest> views;
  views.reserve(requests.size());
  for (const OwnedRequest& r : requests) views.push_back(r.View());
  return views;
}

}  // namespace

ResilientStore::ResilientStore(Store& backend, ResilientStoreOptions options)
    : backend_(backend),
      clock_(options.clock ? *options.clock : SystemClock::Instance()),
      breakers_(std::make_unique<resilience::DomainBreakers>(resilience::BreakerOptions{
          .failures_to_open = options.failures_to_open, .open_for = options.open_for})),
      hot_keys_(options.hot_key_capacity > 0
                    ? std::make_unique<resilience::HotKeyCache>(options.hot_key_capacity)
                    : nullptr),
      policies_(std::make_unique<resilience::FailurePolicies>(options, clock_)) {}

ResilientStore::~ResilientStore() = default;

bool ResilientStore::UsesCache(const CheckRequest& request) const {
  return hot_keys_ && resilience::HotKeyCache::Serves(request);
}

BreakerPass ResilientStore::Allow(std::string_view scope, std::string_view key, Time now) {
  const uint32_t domain = backend_.FailureDomain(scope, key);
  return breakers_->For(domain).Allow(now, domain);
}

bool ResilientStore::Observe(const BreakerPass& pass, const Result<Decision>& answer, bool counts,
                             std::vector<uint32_t>* failed) {
  resilience::Breaker& breaker = breakers_->For(pass.domain);
  if (answer.ok()) {
    breaker.Succeeded(pass);
    return false;
  }
  if (!IsStoreOutage(answer.status())) {
    breaker.Released(pass);
    return false;
  }
  store_errors_.fetch_add(1, std::memory_order_relaxed);
  if (!counts) {
    breaker.Released(pass);
    return true;
  }
  if (failed != nullptr) {
    if (std::find(failed->begin(), failed->end(), pass.domain) != failed->end()) {
      breaker.Released(pass);
      return true;
    }
    failed->push_back(pass.domain);
  }
  breaker.Failed(pass, clock_.now());
  return true;
}

uint64_t ResilientStore::Sending(const CheckRequest& request) {
  return Leasable(request) ? sent_.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
}

// A lease's take answers every check that waited on it: its failure is one failed call. So a
// leased check's failure counts unless the same key's failed after the check was sent (the take
// it waited on, at most one in flight per key).
bool ResilientStore::CountsAsFailure(const CheckRequest& request, uint64_t sent) {
  if (sent == 0) return true;
  const size_t hash = std::hash<std::string_view>{}(request.key) ^
                      std::hash<std::string_view>{}(request.scope) * 31;
  LeaseFailure& last = lease_failures_[hash % lease_failures_.size()];
  if (last.key_hash.load(std::memory_order_relaxed) == hash &&
      sent <= last.failed_at.load(std::memory_order_relaxed)) {
    return false;
  }
  last.key_hash.store(hash, std::memory_order_relaxed);
  last.failed_at.store(sent_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return true;
}

void ResilientStore::Count(const Decision& decision) {
  by_source_[static_cast<size_t>(decision.source)].fetch_add(1, std::memory_order_relaxed);
}

std::optional<Decision> ResilientStore::DecideHere(const CheckRequest& request, Time now,
                                                   BreakerPass& pass) {
  std::optional<Decision> here = UsesCache(request) ? hot_keys_->Deny(request, now) : std::nullopt;
  if (!here) {
    pass = Allow(request.scope, request.key, now);
    if (!pass.allowed) here = policies_->Decide(request);
  }
  if (here) Count(*here);
  return here;
}

Result<Decision> ResilientStore::Settle(const CheckRequest& request, const BreakerPass& pass,
                                        Time sent, uint64_t sent_number, Result<Decision> answer,
                                        std::vector<uint32_t>* failed) {
  Result<Decision> result = std::move(answer);
  const bool counts =
      result.ok() || !IsStoreOutage(result.status()) || CountsAsFailure(request, sent_number);
  if (Observe(pass, result, counts, failed)) {
    result = policies_->Decide(request);
  } else if (result.ok() && !result->allowed && UsesCache(request)) {
    // Counted from when the request was sent, no later than when the backend decided: the cache
    // never denies past the backend's retry_after.
    hot_keys_->Remember(request, sent, *result);
  }
  if (result.ok()) Count(*result);
  return result;
}

// A probe must be answered by the store itself: without lease terms, a LeasingStore below sends
// it on instead of answering from a lease it holds.
CheckRequest ResilientStore::ToBackend(const CheckRequest& request, const BreakerPass& pass) {
  CheckRequest sent = request;
  if (pass.probe) sent.lease = {};
  return sent;
}

void ResilientStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  const Time now = clock_.now();
  if (requests.size() == 1) return CheckOne(requests.front(), now, std::move(done));
  struct Batch {
    std::vector<Result<Decision>> results;
    std::vector<size_t> sent_index;
    std::vector<BreakerPass> sent_pass;
    std::vector<uint64_t> sent_number;
    std::vector<OwnedRequest> sent;
  };
  auto batch = std::make_shared<Batch>();
  batch->results.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    BreakerPass pass;
    if (auto here = DecideHere(requests[i], now, pass)) {
      batch->results.emplace_back(*here);
      continue;
    }
    batch->results.emplace_back(Status::Internal("not decided"));
    batch->sent_index.push_back(i);
    batch->sent_pass.push_back(pass);
    const CheckRequest to_backend = ToBackend(requests[i], pass);
    batch->sent_number.push_back(Sending(to_backend));
    batch->sent.emplace_back(to_backend);
  }
  if (batch->sent.empty()) return done(std::move(batch->results));
  backend_.CheckBatchAsync(Views(batch->sent),
                           [this, batch, now, done = std::move(done)](auto answers) {
                             std::vector<uint32_t> failed;  // one store call: one outage per domain
                             for (size_t k = 0; k < answers.size(); ++k) {
                               batch->results[batch->sent_index[k]] =
                                   Settle(batch->sent[k].View(), batch->sent_pass[k], now,
                                          batch->sent_number[k], std::move(answers[k]), &failed);
                             }
                             done(std::move(batch->results));
                           });
}

// A batch of one, the most common, with no more than the request's copy and the callback's.
void ResilientStore::CheckOne(const CheckRequest& request, Time now, BatchCallback done) {
  BreakerPass pass;
  if (auto here = DecideHere(request, now, pass)) {
    std::vector<Result<Decision>> results;
    results.emplace_back(*here);
    return done(std::move(results));
  }
  const CheckRequest sent = ToBackend(request, pass);
  backend_.CheckBatchAsync(
      {&sent, 1}, [this, owned = OwnedRequest(sent), pass, now, number = Sending(sent),
                   done = std::move(done)](std::vector<Result<Decision>> answers) {
        answers.front() = Settle(owned.View(), pass, now, number, std::move(answers.front()));
        done(std::move(answers));
      });
}

void ResilientStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  struct Call {
    std::vector<OwnedRequest> requests;
    std::vector<BreakerPass> passes;
  };
  auto call = std::make_shared<Call>();
  const Time now = clock_.now();
  bool through = true;
  for (const CheckRequest& r : requests) {
    call->requests.emplace_back(r);
    call->passes.push_back(Allow(r.scope, r.key, now));
    through = through && call->passes.back().allowed;
  }
  // The requests decided by their policies, counted.
  const auto by_policy = [this, call] {
    std::vector<Decision> decisions = policies_->DecideAll(Views(call->requests));
    for (const Decision& d : decisions) Count(d);
    return decisions;
  };
  if (!through) {
    // Nothing sent: the passes that a breaker let through give their probe slot back.
    for (const BreakerPass& pass : call->passes) {
      if (pass.allowed) breakers_->For(pass.domain).Released(pass);
    }
    return done(by_policy());
  }
  backend_.CheckAllAsync(
      Views(call->requests), [this, call, by_policy, done = std::move(done)](auto answer) {
        const Result<Decision> outcome =
            answer.ok() ? Result<Decision>(Decision{}) : Result<Decision>(answer.status());
        bool outage = false;
        std::vector<uint32_t> failed;  // one store call: one outage per domain
        for (const BreakerPass& pass : call->passes) {
          outage = Observe(pass, outcome, /*counts=*/true, &failed) || outage;
        }
        if (outage) return done(by_policy());
        if (answer.ok()) {
          for (const Decision& d : *answer) Count(d);
        }
        done(std::move(answer));
      });
}

void ResilientStore::ProbeAsync(DecisionCallback done) {
  ProbeAsync(ReadinessProbe(), std::move(done));
}

void ResilientStore::ProbeAsync(const CheckRequest& probe, DecisionCallback done) {
  const BreakerPass pass = Allow(probe.scope, probe.key, clock_.now());
  if (!pass.allowed) {
    return done(Status::Unavailable("circuit breaker open: the store failed repeatedly"));
  }
  backend_.CheckAsync(probe, [this, pass, done = std::move(done)](Result<Decision> answer) {
    Observe(pass, answer);
    done(std::move(answer));
  });
}

void ResilientStore::ForgetHere(std::string_view scope, std::string_view key) {
  if (hot_keys_) hot_keys_->Forget(scope, key);
  policies_->Forget(scope, key);
}

void ResilientStore::DoResetAsync(std::string_view scope, std::string_view key,
                                  StatusCallback done) {
  ForgetHere(scope, key);
  backend_.ResetAsync(scope, key, std::move(done));
}

void ResilientStore::DoGiveBackAsync(std::string_view scope, const Limit& limit,
                                     std::string_view key, int64_t units, Time apply_by,
                                     StatusCallback done) {
  if (!hot_keys_) {
    return backend_.GiveBackAsync(scope, limit, key, units, std::move(done), apply_by);
  }
  // Dropped once the units are back: a denial remembered before then may be stale.
  backend_.GiveBackAsync(
      scope, limit, key, units,
      [this, scope = std::string(scope), key = std::string(key),
       done = std::move(done)](Status status) {
        hot_keys_->Forget(scope, key);
        done(std::move(status));
      },
      apply_by);
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
  breakers_->Report(stats, [this](uint32_t domain) { return backend_.FailureDomainName(domain); });
  return stats;
}

BreakerState ResilientStore::breaker_state() const { return breakers_->worst(); }

}  // namespace sluice
