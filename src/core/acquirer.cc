#include "sluice/acquirer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/await.h"
#include "base/mutex.h"
#include "base/names.h"
#include "core/waiting_lines.h"

namespace sluice {

namespace {

constexpr base::EnumName<AcquireOutcome> kAcquireOutcomeNames[] = {
    {AcquireOutcome::kAdmitted, "admitted"},
    {AcquireOutcome::kDenied, "denied"},
    {AcquireOutcome::kQueueFull, "queue_full"},
    {AcquireOutcome::kCancelled, "cancelled"},
};

}  // namespace

const char* AcquireOutcomeName(AcquireOutcome outcome) {
  return base::NameOf(kAcquireOutcomeNames, outcome);
}

// The acquires' state machine: an acquire waits in its key's line (kInLine), checks the store
// when its turn comes (kChecking), and then is admitted, denied, booked until its slot
// (kBooked, on a meter) or, at the head of its line, sleeps until its retry (kSleeping, on a
// window algorithm).
class Acquirer::State : public std::enable_shared_from_this<State> {
 public:
  State(Limiter& limiter, Timers& timers, AcquirerOptions options)
      : limiter_(limiter),
        timers_(timers),
        books_slots_(IsMeter(limiter.limit().algorithm())),
        lines_(options) {}

  Limiter& limiter() const { return limiter_; }

  AcquireId Start(std::string_view key, int64_t cost, Duration max_wait, AcquireCallback done) {
    // A callback run from here may destroy the Acquirer that holds this state.
    const auto self = shared_from_this();
    Status valid = ValidateCheck(
        {.scope = limiter_.name(), .limit = &limiter_.limit(), .key = key, .cost = cost});
    if (valid.ok() && max_wait.count() < 0) {
      valid = Status::InvalidArgument("max_wait must not be negative, got " +
                                      std::to_string(max_wait.count()) + "us");
    }
    if (!valid.ok()) {
      done(std::move(valid));
      return 0;
    }
    base::MutexLock lock(mu_);
    const WaiterPtr waiter = lines_.Join(key);
    if (!waiter) {
      ++stats_.queue_full;
      lock.Unlock();
      Acquisition refused;
      refused.outcome = AcquireOutcome::kQueueFull;
      done(std::move(refused));
      return 0;
    }
    waiter->cost = cost;
    waiter->start = timers_.now();
    waiter->deadline = waiter->start + max_wait;
    waiter->done = std::move(done);
    const AcquireId id = waiter->id;
    std::vector<WaiterPtr> turn = TakeTurn(waiter->key);
    // Behind a head that sleeps between checks, a waiter may run out of time in line (at once,
    // with no max_wait).
    if (waiter->phase == WaitPhase::kInLine && !books_slots_) {
      waiter->timer = timers_.Start(max_wait, [self, id] { self->OnDeadline(id); });
    }
    lock.Unlock();
    Send(std::move(turn));
    return id;
  }

  bool Cancel(AcquireId id) {
    const auto self = shared_from_this();  // as in Start
    Completions completions;
    std::vector<WaiterPtr> next;
    {
      base::MutexLock lock(mu_);
      const WaiterPtr w = lines_.Find(id);
      if (!w) return false;
      switch (w->phase) {
        case WaitPhase::kChecking:
          if (w->cancelled) return false;
          w->cancelled = true;  // ends when the store answers
          return true;
        case WaitPhase::kSleeping:
          lines_.PassTurn(w->key);
          break;
        case WaitPhase::kInLine:
        case WaitPhase::kBooked:  // the slot stays consumed
          break;
      }
      Finish(w, AcquireOutcome::kCancelled, w->last, completions);
      next = TakeTurn(w->key);
    }
    Run(completions);
    Send(std::move(next));
    return true;
  }

  void CancelAll() {
    std::vector<AcquireId> ids;
    {
      base::MutexLock lock(mu_);
      ids = lines_.ids();
    }
    for (AcquireId id : ids) Cancel(id);
  }

  void Shutdown() {
    Completions completions;
    {
      base::MutexLock lock(mu_);
      shut_down_ = true;
      for (const WaiterPtr& w : lines_.RemoveAll()) {
        StopTimer(*w);
        Complete(*w, AcquireOutcome::kCancelled, w->last, completions);
      }
    }
    Run(completions);
  }

  AcquirerStats stats() const {
    base::MutexLock lock(mu_);
    AcquirerStats s = stats_;
    s.in_progress = lines_.size();
    return s;
  }

 private:
  using WaitPhase = core::WaitPhase;
  using WaiterPtr = core::WaiterPtr;

  struct Completion {
    AcquireCallback done;
    Result<Acquisition> result;
  };
  using Completions = std::vector<Completion>;

  // The acquires of `key` whose turn it is to check the store, if it is their turn: on a meter
  // the whole line books in one batch, decided in order; otherwise the head alone checks.
  std::vector<WaiterPtr> TakeTurn(const std::string& key) SLUICE_REQUIRES(mu_) {
    if (shut_down_) return {};
    std::vector<WaiterPtr> turn = lines_.TakeTurn(key, books_slots_);
    for (const WaiterPtr& w : turn) StopTimer(*w);
    return turn;
  }

  void Send(std::vector<WaiterPtr> turn) SLUICE_EXCLUDES(mu_) {
    if (turn.empty()) return;
    const Time now = timers_.now();
    const Duration most = MaxDelayOf(limiter_.limit());
    std::vector<KeyCost> checks;
    checks.reserve(turn.size());
    for (const WaiterPtr& w : turn) {
      const Duration left = std::clamp(w->deadline - now, Duration(0), most);
      checks.push_back(
          {.key = w->key, .cost = w->cost, .max_delay = books_slots_ ? left : Duration(0)});
    }
    limiter_.CheckBatchAsync(checks, [self = shared_from_this(), turn = std::move(turn)](
                                         std::vector<Result<Decision>> results) {
      self->OnResults(turn, std::move(results));
    });
  }

  void OnResults(const std::vector<WaiterPtr>& turn, std::vector<Result<Decision>> results) {
    Completions completions;
    std::vector<WaiterPtr> next;
    {
      base::MutexLock lock(mu_);
      if (shut_down_) return;
      const std::string& key = turn.front()->key;
      const Time now = timers_.now();
      bool head_sleeps = false;
      for (size_t i = 0; i < turn.size(); ++i) {
        const WaiterPtr& w = turn[i];
        Result<Decision>& r = results[i];
        if (r.ok()) w->last = *r;
        if (w->cancelled) {
          Finish(w, AcquireOutcome::kCancelled, w->last, completions);
        } else if (!r.ok()) {
          ++stats_.errors;
          completions.push_back({std::move(w->done), r.status()});
          Remove(w);
        } else if (r->allowed && r->delay.count() == 0) {
          Finish(w, AcquireOutcome::kAdmitted, *r, completions);
        } else if (r->allowed) {
          w->phase = WaitPhase::kBooked;
          w->timer = timers_.Start(
              r->delay, [self = shared_from_this(), id = w->id] { self->OnSlotCame(id); });
        } else {
          lines_.NoteDenial(key, *r);
          // The wait cannot come sooner than retry_after, nor a slot be booked closer.
          if (books_slots_ || now + r->retry_after > w->deadline) {
            Finish(w, AcquireOutcome::kDenied, *r, completions);
          } else {
            w->phase = WaitPhase::kSleeping;
            w->timer = timers_.Start(
                r->retry_after, [self = shared_from_this(), id = w->id] { self->OnRetry(id); });
            head_sleeps = true;
          }
        }
      }
      if (!head_sleeps) lines_.PassTurn(key);
      next = TakeTurn(key);
    }
    Run(completions);
    Send(std::move(next));
  }

  // The timers' callbacks: each acts only on an acquire still in the phase its timer was for.

  void OnSlotCame(AcquireId id) {
    FinishOnTimer(id, WaitPhase::kBooked, AcquireOutcome::kAdmitted);
  }

  void OnRetry(AcquireId id) {
    std::vector<WaiterPtr> next;
    {
      base::MutexLock lock(mu_);
      const WaiterPtr w = TimerFired(id, WaitPhase::kSleeping);
      if (!w) return;
      lines_.ReturnToFront(w);  // still the head
      next = TakeTurn(w->key);
    }
    Send(std::move(next));
  }

  void OnDeadline(AcquireId id) { FinishOnTimer(id, WaitPhase::kInLine, AcquireOutcome::kDenied); }

  // Ends an acquire still in `phase` with `outcome`: admitted with its booked slot's decision, or
  // denied with its line's last denial.
  void FinishOnTimer(AcquireId id, WaitPhase phase, AcquireOutcome outcome) {
    Completions completions;
    {
      base::MutexLock lock(mu_);
      const WaiterPtr w = TimerFired(id, phase);
      if (!w) return;
      Finish(w, outcome, outcome == AcquireOutcome::kAdmitted ? w->last : lines_.LastDenial(w->key),
             completions);
    }
    Run(completions);
  }

  // The acquire `id`, if it is still in `phase`, with its timer spent; null otherwise.
  WaiterPtr TimerFired(AcquireId id, WaitPhase phase) SLUICE_REQUIRES(mu_) {
    WaiterPtr w = lines_.Find(id);
    if (!w || w->phase != phase) return nullptr;
    w->timer.reset();
    return w;
  }

  // Ends `w` with `outcome`.
  void Finish(const WaiterPtr& w, AcquireOutcome outcome, const Decision& decision,
              Completions& completions) SLUICE_REQUIRES(mu_) {
    Complete(*w, outcome, decision, completions);
    Remove(w);
  }

  // Counts `outcome` and queues the callback that reports it.
  void Complete(core::Waiter& w, AcquireOutcome outcome, const Decision& decision,
                Completions& completions) SLUICE_REQUIRES(mu_) {
    switch (outcome) {
      case AcquireOutcome::kAdmitted:
        ++stats_.admitted;
        break;
      case AcquireOutcome::kDenied:
        ++stats_.denied;
        break;
      case AcquireOutcome::kQueueFull:
        ++stats_.queue_full;
        break;
      case AcquireOutcome::kCancelled:
        ++stats_.cancelled;
        break;
    }
    completions.push_back(
        {std::move(w.done),
         Acquisition{.outcome = outcome, .decision = decision, .waited = timers_.now() - w.start}});
  }

  void Remove(const WaiterPtr& w) SLUICE_REQUIRES(mu_) {
    StopTimer(*w);
    lines_.Remove(w);
  }

  void StopTimer(core::Waiter& w) SLUICE_REQUIRES(mu_) {
    if (!w.timer) return;
    timers_.Cancel(*w.timer);
    w.timer.reset();
  }

  static void Run(Completions& completions) {
    for (auto& c : completions) c.done(std::move(c.result));
  }

  Limiter& limiter_;
  Timers& timers_;
  const bool books_slots_;

  // Also guards the Waiters but what is fixed when they start: their id, key, cost, start and
  // deadline.
  mutable base::Mutex mu_;
  bool shut_down_ SLUICE_GUARDED_BY(mu_) = false;
  core::WaitingLines lines_ SLUICE_GUARDED_BY(mu_);
  AcquirerStats stats_ SLUICE_GUARDED_BY(mu_);
};

Acquirer::Acquirer(Limiter& limiter, Timers& timers, AcquirerOptions options)
    : state_(std::make_shared<State>(limiter, timers, options)) {}

Acquirer::~Acquirer() { state_->Shutdown(); }

AcquireId Acquirer::AcquireAsync(std::string_view key, int64_t cost, Duration max_wait,
                                 AcquireCallback done) {
  return state_->Start(key, cost, max_wait, std::move(done));
}

Result<Acquisition> Acquirer::Acquire(std::string_view key, int64_t cost, Duration max_wait) {
  return base::Await<Result<Acquisition>>(
      [&](auto done) { AcquireAsync(key, cost, max_wait, std::move(done)); });
}

bool Acquirer::Cancel(AcquireId id) { return state_->Cancel(id); }

void Acquirer::CancelAll() { state_->CancelAll(); }

AcquirerStats Acquirer::stats() const { return state_->stats(); }

const Limiter& Acquirer::limiter() const { return state_->limiter(); }

}  // namespace sluice
