#include "http/rule_acquirers.h"

#include <utility>

namespace sluice::http {
namespace {

// Adds one to `count` unless it has reached `bound`.
bool TakePlaceIn(std::atomic<size_t>& count, size_t bound) {
  size_t n = count.load();
  do {
    if (n >= bound) return false;
  } while (!count.compare_exchange_weak(n, n + 1));
  return true;
}

}  // namespace

RuleAcquirer::RuleAcquirer(const ServedRule& rule, Timers& timers, std::atomic<size_t>& waiters)
    : limiter(rule.limiter),
      bounds(rule.waiter_bounds),
      waiters(waiters),
      acquirer(limiter, timers, bounds) {}

bool RuleAcquirer::Serves(const ServedRule& rule) const {
  return limiter.limit() == rule.limiter.limit() && limiter.on_error() == rule.limiter.on_error() &&
         bounds.max_waiters_per_key == rule.waiter_bounds.max_waiters_per_key &&
         bounds.max_waiters == rule.waiter_bounds.max_waiters;
}

RuleAcquirers::RuleAcquirers(Timers& timers)
    : timers_(timers), max_waiters_(AcquirerOptions{}.max_waiters) {}

std::shared_ptr<RuleAcquirer> RuleAcquirers::For(const ServedRule& rule) {
  base::MutexLock lock(mu_);
  if (cancelled_.load()) return nullptr;
  RuleLines& lines = rules_.try_emplace(rule.name()).first->second;
  if (lines.current && lines.current->Serves(rule)) return lines.current;
  if (lines.current) {
    std::erase_if(retired_, [](const std::weak_ptr<RuleAcquirer>& r) { return r.expired(); });
    retired_.push_back(lines.current);
  }
  lines.current = std::make_shared<RuleAcquirer>(rule, timers_, lines.waiters);
  return lines.current;
}

bool RuleAcquirers::TakePlace(RuleAcquirer& line) {
  if (!TakePlaceIn(waiters_, max_waiters_.load())) return false;
  if (TakePlaceIn(line.waiters, line.bounds.max_waiters)) return true;
  waiters_.fetch_sub(1);
  return false;
}

void RuleAcquirers::ReleasePlace(RuleAcquirer& line) {
  line.waiters.fetch_sub(1);
  waiters_.fetch_sub(1);
}

void RuleAcquirers::CancelAll() {
  std::vector<std::shared_ptr<RuleAcquirer>> lines;
  {
    base::MutexLock lock(mu_);
    cancelled_.store(true);
    for (const auto& [name, rule] : rules_) {
      if (rule.current) lines.push_back(rule.current);
    }
    for (const auto& retired : retired_) {
      if (auto line = retired.lock()) lines.push_back(std::move(line));
    }
  }
  for (const auto& line : lines) line->acquirer.CancelAll();
}

size_t RuleAcquirers::Waiters(std::string_view rule) const {
  base::MutexLock lock(mu_);
  const auto it = rules_.find(rule);
  return it == rules_.end() ? 0 : it->second.waiters.load(std::memory_order_relaxed);
}

}  // namespace sluice::http
