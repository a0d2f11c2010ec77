#include "resilience/breaker.h"

#include <algorithm>

namespace sluice::resilience {
namespace {

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

}  // namespace

BreakerState Worse(BreakerState a, BreakerState b) { return Severity(a) >= Severity(b) ? a : b; }

BreakerPass Breaker::Allow(Time now, uint32_t domain) {
  // The epoch before the phase: if the breaker opens in between, the call counts as sent before
  // it did.
  const uint64_t epoch = opens_.load(std::memory_order_acquire);
  if (phase_.load(std::memory_order_acquire) == Phase::kClosed) {
    return {.domain = domain, .allowed = true, .epoch = epoch};
  }
  base::MutexLock lock(mu_);
  const uint64_t current = opens_.load(std::memory_order_relaxed);
  if (phase_ == Phase::kUnused) {
    domain_ = domain;
    phase_ = Phase::kClosed;
  }
  if (phase_ == Phase::kOpen && now - opened_at_ >= options_.open_for) {
    phase_ = Phase::kHalfOpen;
    probing_ = false;
  }
  if (phase_ == Phase::kHalfOpen && !probing_) {
    probing_ = true;
    return {.domain = domain, .allowed = true, .probe = true, .epoch = current};
  }
  return {.domain = domain, .allowed = phase_ == Phase::kClosed, .epoch = current};
}

void Breaker::Succeeded(const BreakerPass& pass) {
  if (phase_.load(std::memory_order_acquire) == Phase::kClosed &&
      failures_.load(std::memory_order_relaxed) == 0) {
    return;
  }
  base::MutexLock lock(mu_);
  if (!Current(pass)) return;
  // Only the probe closes an open breaker: a success of a call sent before it opened must not
  // skip the probe.
  if (phase_ == Phase::kClosed || (phase_ == Phase::kHalfOpen && pass.probe)) {
    failures_ = 0;
    probing_ = false;
    phase_ = Phase::kClosed;
  }
}

void Breaker::Failed(const BreakerPass& pass, Time now) {
  base::MutexLock lock(mu_);
  if (!Current(pass)) return;
  const bool probe_failed = phase_ == Phase::kHalfOpen && pass.probe;
  const bool too_many =
      phase_ == Phase::kClosed && failures_.fetch_add(1, std::memory_order_relaxed) + 1 >=
                                      std::max(options_.failures_to_open, 1);
  if (probe_failed || too_many) {
    phase_ = Phase::kOpen;
    opened_at_ = now;
    probing_ = false;
    failures_ = 0;
    opens_.fetch_add(1, std::memory_order_release);
  }
}

void Breaker::Released(const BreakerPass& pass) {
  if (!pass.probe) return;
  base::MutexLock lock(mu_);
  if (Current(pass) && phase_ == Phase::kHalfOpen) probing_ = false;
}

uint32_t Breaker::domain() const {
  base::MutexLock lock(mu_);
  return domain_;
}

BreakerState Breaker::state() const {
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

DomainBreakers::DomainBreakers(BreakerOptions options) {
  for (size_t i = 0; i < kSlots; ++i) breakers_.emplace_back(options);
}

BreakerState DomainBreakers::worst() const {
  BreakerState worst = BreakerState::kClosed;
  for (const Breaker& breaker : breakers_) worst = Worse(worst, breaker.state());
  return worst;
}

void DomainBreakers::Report(StoreHealthStats& stats,
                            const std::function<std::string(uint32_t)>& name_of) const {
  for (const Breaker& breaker : breakers_) {
    const uint64_t opens = breaker.opens();
    const BreakerState state = breaker.state();
    stats.breaker_opens += opens;
    stats.breaker = Worse(stats.breaker, state);
    if (breaker.used()) {
      stats.breakers.push_back(
          {.domain = name_of(breaker.domain()), .state = state, .opens = opens});
    }
  }
}

}  // namespace sluice::resilience
