// LeaseTable: the leases of one LeasingStore, one entry per (scope, key), and the state machine
// that decides a leased check (leasing_store.h says what it guarantees). An entry holds, for one
// key, the lease in use (units left, when it ends), or a refusal (until when the store has no
// lease to give), or a take in flight with the checks that wait for it. The table makes the
// backend calls itself: takes (Store::CheckAsync of a lease's units), and give-backs
// (Store::GiveBackAsync) when a meter's lease ends unused. Timers end leases and drop idle
// entries.
//
// Thread safety: fully thread-safe; the table is sharded, each shard under its own mutex, and no
// callback runs with one held. Close() stops it: it gives back what is unused and waits for the
// calls in flight. The table is shared (shared_ptr) with the callbacks of the calls and timers it
// starts, which find it closed if they run after Close.
#pragma once

#include <array>
#include <atomic>
#include <boost/container/small_vector.hpp>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "sluice/lease_stats.h"
#include "sluice/store.h"
#include "sluice/timers.h"

namespace sluice::lease {

class LeaseTable : public std::enable_shared_from_this<LeaseTable> {
 public:
  LeaseTable(Store& backend, Timers& timers, size_t max_keys, Duration store_timeout);

  // Decides `request` (validated, Leasable) from the key's lease, taking one when
  // needed; `done` runs once, inline or on the backend's or the timers' thread. False, and
  // nothing done (`done` left as it was), when the table is full and does not hold the key: the
  // caller decides the request some other way.
  bool Decide(const CheckRequest& request, DecisionCallback& done);
  // Forgets the key's lease and refusal, without giving anything back (the key is being reset).
  // A take in flight still answers its waiters, and the rest of what it took lapses: it was
  // counted before the reset, or is for the reset key, so serving it would admit past the limit.
  void Forget(std::string_view scope, std::string_view key);
  // Ends every lease, gives back the unused units of meters, and waits until no call of the table
  // is in flight. Decide returns false afterwards.
  void Close();

  LeaseStats stats() const;

 private:
  struct Waiter {
    CheckRequest request;
    DecisionCallback done;
  };
  struct Entry {
    Entry(std::string_view scope, std::string_view key, const Limit& limit, LeaseTerms terms)
        : scope(scope), key(key), limit(limit), terms(terms) {}

    std::string scope;
    std::string key;
    Limit limit;
    LeaseTerms terms;
    int64_t units_left = 0;  // of the lease in use
    Time lease_ends{};       // the lease is in use while now < lease_ends and units are left
    Time refused_until{};    // the key's checks are refused here until then
    Decision basis;          // the take's decision, and when it was sent: what leased checks report
    Time basis_at{};
    uint64_t generation = 0;  // of the lease or refusal in place: stale timers find another
    bool taking = false;
    uint64_t takes = 0;  // takes started: a stale overdue timer finds another
    Time answer_by{};    // while taking: when the waiters' first take's deadline passes
    bool reset_while_taking = false;  // the take's answer predates the key's reset
    std::vector<Waiter> waiters;      // while taking, the checks it will decide, in arrival order
    int64_t waiting_cost = 0;         // their costs, at most a lease's units
  };
  struct Shard {
    mutable base::Mutex mu;
    std::unordered_map<std::string, Entry> entries SLUICE_GUARDED_BY(mu);
  };
  // A call to make once the shard's mutex is given up.
  struct GiveBack {
    std::string scope;
    std::string key;
    Limit limit;
    int64_t units;
    Time apply_by;  // what `units` counted the lease's age up to
  };
  // A timer to start: after how long, and the number it passes its step.
  using Timer = std::pair<Duration, uint64_t>;
  // What a step of an entry leaves to do outside the mutex: callbacks to run, a take to start,
  // units to give back.
  struct Outcome {
    // Most steps answer one check: that one takes no allocation.
    boost::container::small_vector<std::pair<DecisionCallback, Result<Decision>>, 1> answers;
    std::optional<CheckRequest> take;  // points into the entry, alive while it is taking
    std::optional<GiveBack> give_back;
    std::optional<Timer> wake;     // after, the generation
    std::optional<Timer> overdue;  // after, the take's number
    std::string entry_id;
  };

  Shard& ShardOf(std::string_view id);
  // Under its shard's mutex, step(entry, out) on the entry named `id`, if there is one; the entry
  // is dropped when the step returns true. Then runs `out`.
  template <typename Step>
  void StepEntry(const std::string& id, Step step);
  // Ends the lease in use and the refusal, counting nothing.
  static void ClearLeaseAndRefusal(Entry& entry);
  // Serves what the entry's lease or refusal can, in order, from `waiters`. After their take
  // (`after_take`), what the lease cannot serve is refused; otherwise the one waiter it cannot
  // serve (a check that just came) starts a take.
  void Serve(Entry& entry, std::span<Waiter> waiters, Time now, bool after_take, Outcome& out);
  // Marks the entry taking, with `waiter` added to its waiters, and has the outcome take `units`.
  void StartTake(Entry& entry, std::optional<Waiter> waiter, int64_t units, Outcome& out);
  // Ends the lease in use at `now`: a meter's unused units go back, less what its refill may have
  // wasted since the lease was asked for (see leasing_store.h); the rest lapse.
  void EndLease(Entry& entry, Time now, Outcome& out);
  // The backend's answer to a take of `units` sent at `sent`.
  void Taken(const std::string& id, int64_t units, Time sent, Result<Decision> answer);
  // After the table closed: ends the entry's lease and fails its waiters.
  void Abandon(Entry& entry, Time now, Outcome& out);
  // A lease's or refusal's timer: ends what is over, and drops the entry once nothing is left.
  void Wake(const std::string& id, uint64_t generation);
  // A second take's timer: if take number `take` is still in flight when its waiters' deadline
  // passes, they are answered DEADLINE_EXCEEDED (for their failure policy) without it.
  void TakeOverdue(const std::string& id, uint64_t take);
  // Answers `waiters` DEADLINE_EXCEEDED: their deadline passed before a lease could serve them.
  void Overdue(std::span<Waiter> waiters, Outcome& out);
  // Runs `out` with no mutex held.
  void Finish(Outcome out) SLUICE_EXCLUDES(calls_mu_);
  // Starts `timer`, which calls `step` with the entry's id and the timer's number.
  using TimerStep = void (LeaseTable::*)(const std::string& id, uint64_t number);
  void StartTimer(const Timer& timer, const std::string& id, TimerStep step);
  void CallStarted();
  void CallEnded();

  Store& backend_;
  Timers& timers_;
  const size_t max_keys_;
  const Duration store_timeout_;
  static constexpr size_t kShards = 16;
  std::array<Shard, kShards> shards_;
  std::atomic<size_t> size_{0};

  base::Mutex calls_mu_;
  std::condition_variable calls_done_;
  size_t calls_in_flight_ SLUICE_GUARDED_BY(calls_mu_) = 0;
  std::atomic<bool> closed_{false};

  std::atomic<uint64_t> taken_{0}, units_taken_{0}, units_used_{0}, units_returned_{0},
      units_lapsed_{0}, refusals_{0};
};

}  // namespace sluice::lease
