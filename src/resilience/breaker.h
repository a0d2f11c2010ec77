// Circuit breakers, one per failure domain of a store (Store::FailureDomain).
//
// Breaker is one domain's state machine. Closed, it lets every call through; after
// `failures_to_open` consecutive outages it opens and lets none through for `open_for`; then,
// half-open, it lets one probe through at a time: the probe's success, and nothing else, closes
// it, and the probe's outage opens it again. Only an answer to a call let through since the
// breaker last opened tells of the backend as it is now: one sent before (slow, or queued) says
// nothing of whether it recovered, and counts for nothing. An answer that says nothing of the
// backend's health (a bad request, a full store, a script's error) only frees the probe's turn.
//
// DomainBreakers keeps a Breaker for each domain id below kSlots; larger ids share one, by id
// modulo kSlots.
//
// Thread safety: fully thread-safe. A closed breaker lets a call through with two atomic loads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "base/mutex.h"
#include "sluice/clock.h"
#include "sluice/store_health.h"

namespace sluice::resilience {

struct BreakerOptions {
  int failures_to_open = 5;  // at least 1
  Duration open_for{0};
};

// What a breaker said to one call: whether it may go to the backend, and what its answer may
// change.
struct BreakerPass {
  uint32_t domain = 0;
  bool allowed = false;
  bool probe = false;  // the one call a half-open breaker lets through
  uint64_t epoch = 0;  // the breaker's opens when the call was let through
};

// The worse of two states: open, then half_open, then closed.
BreakerState Worse(BreakerState a, BreakerState b);

class Breaker {
 public:
  explicit Breaker(BreakerOptions options) : options_(options) {}
  Breaker(const Breaker&) = delete;
  Breaker& operator=(const Breaker&) = delete;

  // Whether a call for `domain` may go to the backend now. The breaker starts unused; the first
  // call records its domain (for stats) on the way to closed.
  BreakerPass Allow(Time now, uint32_t domain);
  // The backend answered the call.
  void Succeeded(const BreakerPass& pass);
  // The backend was out for the call (IsStoreOutage).
  void Failed(const BreakerPass& pass, Time now);
  // The answer said nothing of the backend's health.
  void Released(const BreakerPass& pass);

  bool used() const { return phase_.load(std::memory_order_acquire) != Phase::kUnused; }
  // The domain of the first call it let through.
  uint32_t domain() const;
  BreakerState state() const;
  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }

 private:
  enum class Phase : uint8_t { kUnused, kClosed, kOpen, kHalfOpen };

  // Whether the call was let through since the breaker last opened.
  bool Current(const BreakerPass& pass) const SLUICE_REQUIRES(mu_) {
    return pass.epoch == opens_.load(std::memory_order_relaxed);
  }

  const BreakerOptions options_;
  // The atomics are read without the lock on the fast paths, and written under it.
  mutable base::Mutex mu_;
  std::atomic<Phase> phase_{Phase::kUnused};
  std::atomic<int> failures_{0};
  std::atomic<uint64_t> opens_{0};
  Time opened_at_ SLUICE_GUARDED_BY(mu_);
  bool probing_ SLUICE_GUARDED_BY(mu_) = false;
  uint32_t domain_ SLUICE_GUARDED_BY(mu_) = 0;
};

class DomainBreakers {
 public:
  // Domain ids with a breaker of their own.
  static constexpr size_t kSlots = 256;

  explicit DomainBreakers(BreakerOptions options);

  Breaker& For(uint32_t domain) { return breakers_[domain % kSlots]; }

  // The worst state over the domains.
  BreakerState worst() const;
  // Adds to `stats` the breakers' opens, the worst state and, for each breaker a domain has
  // used, its state, under the name `name_of` gives that domain.
  void Report(StoreHealthStats& stats, const std::function<std::string(uint32_t)>& name_of) const;

 private:
  std::deque<Breaker> breakers_;  // kSlots; a deque holds what cannot move
};

}  // namespace sluice::resilience
