// The waiting lines of /v1/acquire and the count of the acquires in progress.
//
// A rule's line is an Acquirer over a copy of the rule's Limiter, kept while the rule stays the
// same: a reload that changes the rule (its limit, failure policy or waiter bounds) gets a new
// line, and the acquires waiting on the old one finish there. The acquires in progress are
// counted per rule, over all its lines (whichever rule set they started under), and over every
// rule; each count is bounded (the rule's max_waiters, SetMaxWaiters), and the per-rule counts
// are what the sluice_acquire_waiters gauge shows (a WaiterCounts for Metrics).
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "http/metrics.h"
#include "http/rule_table.h"
#include "sluice/acquirer.h"
#include "sluice/limiter.h"

namespace sluice::http {

// One rule's line.
struct RuleAcquirer {
  // `waiters` counts the rule's acquires in progress and must outlive the line.
  RuleAcquirer(const ServedRule& rule, Timers& timers, std::atomic<size_t>& waiters);

  // Whether the line decides as `rule` does (a rule of the same name).
  bool Serves(const ServedRule& rule) const;

  Limiter limiter;
  const AcquirerOptions bounds;
  std::atomic<size_t>& waiters;  // the rule's acquires in progress, on this line and the others
  Acquirer acquirer;
};

class RuleAcquirers final : public WaiterCounts {
 public:
  // `timers` is where the acquires wait; it must outlive this object.
  explicit RuleAcquirers(Timers& timers);
  RuleAcquirers(const RuleAcquirers&) = delete;
  RuleAcquirers& operator=(const RuleAcquirers&) = delete;

  // The rule's current line, made if it has none or the rule changed; null once CancelAll has
  // run.
  std::shared_ptr<RuleAcquirer> For(const ServedRule& rule);

  // Counts an acquire in progress on `line`, unless its rule's count or the total is at its
  // bound (false). Each place taken is given back with ReleasePlace.
  bool TakePlace(RuleAcquirer& line);
  void ReleasePlace(RuleAcquirer& line);
  // Bounds the acquires in progress over every rule (default AcquirerOptions::max_waiters).
  void SetMaxWaiters(size_t max_waiters) { max_waiters_.store(max_waiters); }

  // Cancels every acquire in progress, on the current lines and on those a reload replaced, and
  // makes For answer null from now on: for a drain, it cannot be undone.
  void CancelAll();
  bool cancelled() const { return cancelled_.load(); }

  size_t Waiters(std::string_view rule) const override;

 private:
  struct RuleLines {
    std::shared_ptr<RuleAcquirer> current;
    std::atomic<size_t> waiters{0};
  };

  Timers& timers_;
  std::atomic<size_t> max_waiters_;
  std::atomic<size_t> waiters_{0};      // over every rule
  std::atomic<bool> cancelled_{false};  // set under mu_ by CancelAll
  mutable base::Mutex mu_;
  // By rule name; an entry, and so its count, lives as long as this object.
  std::map<std::string, RuleLines, std::less<>> rules_ SLUICE_GUARDED_BY(mu_);
  // Lines replaced by a reload: they live as long as acquires wait on them.
  std::vector<std::weak_ptr<RuleAcquirer>> retired_ SLUICE_GUARDED_BY(mu_);
};

}  // namespace sluice::http
