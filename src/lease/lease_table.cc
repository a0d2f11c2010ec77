#include "lease/lease_table.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <utility>

namespace sluice::lease {

namespace {

// The entry's name: the scope's length (one byte: at most kMaxScopeBytes), the scope, the key.
// Written into `id`, whose capacity a thread reuses from one check to the next.
void WriteEntryId(std::string_view scope, std::string_view key, std::string& id) {
  id.clear();
  id.push_back(static_cast<char>(scope.size()));
  id.append(scope);
  id.append(key);
}

Duration Since(Time then, Time now) { return std::chrono::duration_cast<Duration>(now - then); }

Duration Countdown(Duration from, Duration elapsed) {
  return std::max(from - elapsed, Duration(0));
}

}  // namespace

LeaseTable::LeaseTable(Store& backend, Timers& timers, size_t max_keys, Duration store_timeout)
    : backend_(backend), timers_(timers), max_keys_(max_keys), store_timeout_(store_timeout) {}

LeaseTable::Shard& LeaseTable::ShardOf(std::string_view id) {
  return shards_[std::hash<std::string_view>{}(id) % kShards];
}

template <typename Step>
void LeaseTable::StepEntry(const std::string& id, Step step) {
  Shard& shard = ShardOf(id);
  Outcome out;
  {
    base::MutexLock lock(shard.mu);
    auto it = shard.entries.find(id);
    if (it == shard.entries.end()) return;
    if (step(it->second, out)) {
      shard.entries.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  Finish(std::move(out));
}

void LeaseTable::ClearLeaseAndRefusal(Entry& entry) {
  entry.units_left = 0;
  entry.lease_ends = {};
  entry.refused_until = {};
}

bool LeaseTable::Decide(const CheckRequest& request, DecisionCallback& done) {
  if (closed_.load(std::memory_order_acquire)) return false;
  thread_local std::string id;
  WriteEntryId(request.scope, request.key, id);
  Shard& shard = ShardOf(id);
  Outcome out;
  {
    base::MutexLock lock(shard.mu);
    auto it = shard.entries.find(id);
    if (it == shard.entries.end()) {
      if (size_.load(std::memory_order_relaxed) >= max_keys_) return false;
      it = shard.entries.try_emplace(id, request.scope, request.key, *request.limit, request.lease)
               .first;
      size_.fetch_add(1, std::memory_order_relaxed);
    }
    Entry& entry = it->second;
    const Time now = timers_.now();
    if (entry.limit != *request.limit || entry.terms != request.lease) {
      // The rule changed since: what was leased under the old terms ends.
      if (entry.taking) return false;
      EndLease(entry, now, out);
      entry.refused_until = {};
      entry.limit = *request.limit;
      entry.terms = request.lease;
      ++entry.generation;
    }
    if (entry.taking) {
      // What the take in flight may not cover goes to the backend on its own, rather than wait
      // for another take after it.
      if (entry.waiting_cost + request.cost > entry.terms.units) return false;
      entry.waiting_cost += request.cost;
      entry.waiters.push_back({request, std::move(done)});
    } else {
      Waiter waiter{request, std::move(done)};
      Serve(entry, {&waiter, 1}, now, /*after_take=*/false, out);
      if (out.take) out.entry_id = id;
    }
  }
  Finish(std::move(out));
  return true;
}

void LeaseTable::Serve(Entry& entry, std::span<Waiter> waiters, Time now, bool after_take,
                       Outcome& out) {
  // A take's own waiters are served from it even if its answer came after the lease's end: their
  // checks were decided by the backend when it granted the lease.
  if (!after_take && now >= entry.lease_ends) EndLease(entry, now, out);
  const Duration elapsed = Since(entry.basis_at, now);
  size_t served = 0;
  for (; served < waiters.size(); ++served) {
    Waiter& waiter = waiters[served];
    Decision decision{.limit = entry.limit.count(),
                      .reset_after = Countdown(entry.basis.reset_after, elapsed)};
    if (entry.units_left >= waiter.request.cost) {
      entry.units_left -= waiter.request.cost;
      units_used_.fetch_add(static_cast<uint64_t>(waiter.request.cost), std::memory_order_relaxed);
      decision.allowed = true;
      decision.remaining = entry.units_left;
      if (decision.remaining < entry.limit.capacity()) {
        decision.replenish_after = Countdown(entry.basis.replenish_after, elapsed);
      }
    } else if (after_take || now < entry.refused_until) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      decision.retry_after = std::max(Since(now, entry.refused_until), Duration(1));
      decision.replenish_after = decision.retry_after;
    } else {
      break;
    }
    out.answers.emplace_back(std::move(waiter.done), decision);
  }
  if (served == waiters.size()) return;
  // What is left of the lease does not cover the check: a new lease replaces it.
  EndLease(entry, now, out);
  entry.answer_by = now + store_timeout_;
  StartTake(entry, std::move(waiters.back()), entry.terms.units, out);
}

void LeaseTable::StartTake(Entry& entry, std::optional<Waiter> waiter, int64_t units,
                           Outcome& out) {
  if (waiter) {
    entry.waiting_cost = waiter->request.cost;
    entry.waiters.push_back(std::move(*waiter));
  }
  entry.taking = true;
  ++entry.takes;
  out.take = CheckRequest{.scope = entry.scope,
                          .limit = &entry.limit,
                          .key = entry.key,
                          .cost = units,
                          .on_error = entry.waiters.front().request.on_error};
}

void LeaseTable::EndLease(Entry& entry, Time now, Outcome& out) {
  int64_t lapsed = entry.units_left;
  if (entry.units_left > 0 && IsMeter(entry.limit.algorithm())) {
    // Counted from when the take was sent, which is no later than when the store consumed it.
    const Duration age = Since(entry.basis_at, now) + store_timeout_;
    const int64_t interval = entry.limit.emission_interval().count();
    const int64_t may_have_wasted = (age.count() + interval - 1) / interval;
    const int64_t units = entry.units_left - std::min(may_have_wasted, entry.units_left);
    if (units > 0) {
      out.give_back = GiveBack{entry.scope, entry.key, entry.limit, units, now + store_timeout_};
      lapsed -= units;
    }
  }
  units_lapsed_.fetch_add(static_cast<uint64_t>(lapsed), std::memory_order_relaxed);
  entry.units_left = 0;
  entry.lease_ends = {};
}

// A check waits for at most two calls: the take of a whole lease and, when the backend has less
// but enough for the first waiter, the take of what it has. Both within one deadline: the second
// take's waiters are answered by TakeOverdue if it has not answered by then. The step finds the
// entry: one is never dropped while it is taking.
void LeaseTable::Taken(const std::string& id, int64_t units, Time sent, Result<Decision> answer) {
  StepEntry(id, [&](Entry& entry, Outcome& out) {
    entry.taking = false;
    entry.waiting_cost = 0;
    const bool reset = std::exchange(entry.reset_while_taking, false);
    std::vector<Waiter> waiters = std::move(entry.waiters);
    entry.waiters.clear();
    const Time now = timers_.now();
    const bool whole = units == entry.terms.units;
    out.entry_id = id;
    if (!answer.ok()) {
      for (Waiter& waiter : waiters) out.answers.emplace_back(std::move(waiter.done), answer);
    } else if (answer->allowed) {
      taken_.fetch_add(1, std::memory_order_relaxed);
      units_taken_.fetch_add(static_cast<uint64_t>(units), std::memory_order_relaxed);
      Duration lifetime = entry.terms.lifetime;
      // A fixed window's units count in their window only: its lease ends with it.
      if (entry.limit.algorithm() == Algorithm::kFixedWindow) {
        lifetime = std::min(lifetime, answer->reset_after);
      }
      entry.units_left = units;
      entry.lease_ends = sent + lifetime;
      // After a smaller lease, the refusal of the whole one stands, for when it is used up.
      if (whole) entry.refused_until = {};
      entry.basis = *answer;
      entry.basis_at = sent;
      out.wake = {Since(now, entry.lease_ends), ++entry.generation};
      Serve(entry, waiters, now, /*after_take=*/true, out);
    } else {
      // Refused here until the lease asked for would be there, and the waiters with it, unless
      // the backend has enough for the first of them: then they wait for a smaller lease of
      // what it has.
      entry.refused_until = sent + answer->retry_after;
      entry.basis = *answer;
      entry.basis_at = sent;
      out.wake = {Since(now, entry.refused_until), ++entry.generation};
      const bool smaller_fits = whole && !reset && !waiters.empty() &&
                                answer->remaining >= waiters.front().request.cost &&
                                !closed_.load(std::memory_order_acquire);
      if (smaller_fits && now >= entry.answer_by) {
        Overdue(waiters, out);
      } else if (smaller_fits) {
        entry.waiters = std::move(waiters);
        for (const Waiter& waiter : entry.waiters) entry.waiting_cost += waiter.request.cost;
        StartTake(entry, std::nullopt, answer->remaining, out);
        out.overdue = {Since(now, entry.answer_by), entry.takes};
      } else {
        Serve(entry, waiters, now, /*after_take=*/true, out);
      }
    }
    if (reset) {
      units_lapsed_.fetch_add(static_cast<uint64_t>(entry.units_left), std::memory_order_relaxed);
      ClearLeaseAndRefusal(entry);
    }
    if (closed_.load(std::memory_order_acquire)) Abandon(entry, now, out);
    return !entry.taking && entry.units_left == 0 && now >= entry.refused_until;
  });
}

void LeaseTable::Abandon(Entry& entry, Time now, Outcome& out) {
  EndLease(entry, now, out);
  for (Waiter& waiter : entry.waiters) {
    out.answers.emplace_back(std::move(waiter.done),
                             Status::Unavailable("the leasing store is closing"));
  }
  entry.waiters.clear();
  entry.taking = false;
  out.take.reset();
  out.wake.reset();
  out.overdue.reset();
}

void LeaseTable::Wake(const std::string& id, uint64_t generation) {
  if (closed_.load(std::memory_order_acquire)) return;
  StepEntry(id, [&](Entry& entry, Outcome& out) {
    if (entry.generation != generation || entry.taking) return false;
    const Time now = timers_.now();
    if (now >= entry.lease_ends) EndLease(entry, now, out);
    // The lease's end, then the refusal's (after a smaller lease, both are there).
    const Time next = entry.units_left > 0 ? entry.lease_ends : entry.refused_until;
    if (now >= next) return true;
    out.wake = {Since(now, next), generation};
    out.entry_id = id;
    return false;
  });
}

void LeaseTable::TakeOverdue(const std::string& id, uint64_t take) {
  StepEntry(id, [&](Entry& entry, Outcome& out) {
    if (!entry.taking || entry.takes != take) return false;
    Overdue(entry.waiters, out);
    entry.waiters.clear();
    entry.waiting_cost = 0;
    return false;
  });
}

void LeaseTable::Overdue(std::span<Waiter> waiters, Outcome& out) {
  for (Waiter& waiter : waiters) {
    out.answers.emplace_back(
        std::move(waiter.done),
        Status::DeadlineExceeded("the store did not give the lease in time for this check"));
  }
}

void LeaseTable::Forget(std::string_view scope, std::string_view key) {
  std::string id;
  WriteEntryId(scope, key, id);
  StepEntry(id, [](Entry& entry, Outcome&) {
    if (!entry.taking) return true;
    ClearLeaseAndRefusal(entry);
    entry.reset_while_taking = true;
    ++entry.generation;
    return false;
  });
}

void LeaseTable::Finish(Outcome out) {
  for (auto& [done, answer] : out.answers) done(std::move(answer));
  if (out.give_back) {
    auto give_back = std::make_shared<GiveBack>(std::move(*out.give_back));
    CallStarted();
    backend_.GiveBackAsync(
        give_back->scope, give_back->limit, give_back->key, give_back->units,
        [self = shared_from_this(), give_back](const Status& status) {
          (status.ok() ? self->units_returned_ : self->units_lapsed_)
              .fetch_add(static_cast<uint64_t>(give_back->units), std::memory_order_relaxed);
          self->CallEnded();
        },
        give_back->apply_by);
  }
  if (out.wake) StartTimer(*out.wake, out.entry_id, &LeaseTable::Wake);
  if (out.overdue) StartTimer(*out.overdue, out.entry_id, &LeaseTable::TakeOverdue);
  if (out.take) {
    CallStarted();
    const int64_t units = out.take->cost;
    backend_.CheckAsync(*out.take, [self = shared_from_this(), id = std::move(out.entry_id), units,
                                    sent = timers_.now()](Result<Decision> answer) {
      self->Taken(id, units, sent, std::move(answer));
      self->CallEnded();
    });
  }
}

void LeaseTable::StartTimer(const Timer& timer, const std::string& id, TimerStep step) {
  timers_.Start(std::max(timer.first, Duration(0)),
                [self = shared_from_this(), id, number = timer.second, step] {
                  ((*self).*step)(id, number);
                });
}

void LeaseTable::CallStarted() {
  base::MutexLock lock(calls_mu_);
  ++calls_in_flight_;
}

void LeaseTable::CallEnded() {
  base::MutexLock lock(calls_mu_);
  if (--calls_in_flight_ == 0) calls_done_.notify_all();
}

void LeaseTable::Close() {
  closed_.store(true, std::memory_order_release);
  for (Shard& shard : shards_) {
    std::vector<Outcome> outs;
    {
      base::MutexLock lock(shard.mu);
      for (auto& [id, entry] : shard.entries) {
        if (entry.taking) continue;  // Taken abandons it
        Outcome out;
        EndLease(entry, timers_.now(), out);
        if (out.give_back) outs.push_back(std::move(out));
      }
    }
    for (Outcome& out : outs) Finish(std::move(out));
  }
  base::MutexLock lock(calls_mu_);
  while (calls_in_flight_ > 0) lock.Wait(calls_done_);
}

LeaseStats LeaseTable::stats() const {
  return LeaseStats{.taken = taken_.load(std::memory_order_relaxed),
                    .units_taken = units_taken_.load(std::memory_order_relaxed),
                    .units_used = units_used_.load(std::memory_order_relaxed),
                    .units_returned = units_returned_.load(std::memory_order_relaxed),
                    .units_lapsed = units_lapsed_.load(std::memory_order_relaxed),
                    .refusals = refusals_.load(std::memory_order_relaxed),
                    .held = size_.load(std::memory_order_relaxed)};
}

}  // namespace sluice::lease
