#include "sluice/acquirer.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/await.h"
#include "core/mutex.h"
#include "core/names.h"

namespace sluice {

namespace {

constexpr core::EnumName<AcquireOutcome> kAcquireOutcomeNames[] = {
    {AcquireOutcome::kAdmitted, "admitted"},
    {AcquireOutcome::kDenied, "denied"},
    {AcquireOutcome::kQueueFull, "queue_full"},
    {AcquireOutcome::kCancelled, "cancelled"},
};

}  // namespace

const char* AcquireOutcomeName(AcquireOutcome outcome) {
  return core::NameOf(kAcquireOutcomeNames, outcome);
}

class Acquirer::State : public std::enable_shared_from_this<State> {
 public:
  State(Limiter& limiter, Timers& timers, AcquirerOptions options)
      : limiter_(limiter),
        timers_(timers),
        options_(options),
        books_slots_(IsMeter(limiter.limit().algorithm())) {}

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
    core::MutexLock lock(mu_);
    auto line_it = lines_.try_emplace(std::string(key)).first;
    Line& line = line_it->second;
    if (waiters_.size() >= options_.max_waiters ||
        line.in_progress >= options_.max_waiters_per_key) {
      ++stats_.queue_full;
      if (line.in_progress == 0) lines_.erase(line_it);
      lock.Unlock();
      Acquisition refused;
      refused.outcome = AcquireOutcome::kQueueFull;
      done(std::move(refused));
      return 0;
    }
    auto waiter = std::make_shared<Waiter>();
    waiter->id = next_id_++;
    waiter->key = line_it->first;
    waiter->cost = cost;
    waiter->start = timers_.now();
    waiter->deadline = waiter->start + max_wait;
    waiter->done = std::move(done);
    waiters_.emplace(waiter->id, waiter);
    ++line.in_progress;
    line.waiting.push_back(waiter);
    const AcquireId id = waiter->id;
    Batch batch = TakeBatch(line);
    // Behind a head that sleeps between checks, a waiter may run out of time in line (at once,
    // with no max_wait).
    if (waiter->phase == Phase::kInLine && !books_slots_) {
      waiter->timer = timers_.Start(max_wait, [self, id] { self->OnDeadline(id); });
    }
    lock.Unlock();
    Send(std::move(batch));
    return id;
  }

  bool Cancel(AcquireId id) {
    const auto self = shared_from_this();  // as in Start
    Completions completions;
    Batch next;
    {
      core::MutexLock lock(mu_);
      auto it = waiters_.find(id);
      if (it == waiters_.end()) return false;
      WaiterPtr w = it->second;
      Line& line = lines_.at(w->key);
      switch (w->phase) {
        case Phase::kInLine:
          std::erase(line.waiting, w);
          break;
        case Phase::kChecking:
          if (w->cancelled) return false;
          w->cancelled = true;  // ends when the store answers
          return true;
        case Phase::kSleeping:
          line.busy = false;
          break;
        case Phase::kBooked:
          break;  // the slot stays consumed
      }
      Finish(w, AcquireOutcome::kCancelled, w->last, completions);
      next = TakeBatch(line);
      EraseLineIfIdle(w->key);
    }
    Run(completions);
    Send(std::move(next));
    return true;
  }

  void CancelAll() {
    std::vector<AcquireId> ids;
    {
      core::MutexLock lock(mu_);
      for (const auto& [id, w] : waiters_) ids.push_back(id);
    }
    for (AcquireId id : ids) Cancel(id);
  }

  void Shutdown() {
    Completions completions;
    {
      core::MutexLock lock(mu_);
      shut_down_ = true;
      for (auto& [id, w] : waiters_) {
        if (w->timer) timers_.Cancel(*w->timer);
        ++stats_.cancelled;
        completions.push_back(
            {std::move(w->done), Acquisition{.outcome = AcquireOutcome::kCancelled,
                                             .decision = w->last,
                                             .waited = timers_.now() - w->start}});
      }
      waiters_.clear();
      lines_.clear();
    }
    Run(completions);
  }

  AcquirerStats stats() const {
    core::MutexLock lock(mu_);
    AcquirerStats s = stats_;
    s.in_progress = waiters_.size();
    return s;
  }

 private:
  enum class Phase {
    kInLine,    // waiting for its turn to check
    kChecking,  // in a store call
    kSleeping,  // the head of its line, denied, until its retry_after
    kBooked,    // its slot is booked, until the slot comes
  };

  struct Waiter {
    AcquireId id = 0;
    std::string key;
    int64_t cost = 0;
    Time start, deadline;
    AcquireCallback done;
    Phase phase = Phase::kInLine;
    std::optional<Timers::Id> timer;
    bool cancelled = false;  // while kChecking
    Decision last;           // the store's last decision for it
  };
  using WaiterPtr = std::shared_ptr<Waiter>;

  struct Line {
    std::deque<WaiterPtr> waiting;  // kInLine, first come first
    bool busy = false;              // a store call, or a head sleeping before its next check
    size_t in_progress = 0;         // the key's acquires, whatever their phase
    Decision last_denial;
  };

  struct Completion {
    AcquireCallback done;
    Result<Acquisition> result;
  };
  using Completions = std::vector<Completion>;

  struct Batch {
    std::vector<WaiterPtr> waiters;  // of one key, in line order
  };

  // The next waiters of `line` to check, if it is its turn to check.
  Batch TakeBatch(Line& line) REQUIRES(mu_) {
    Batch batch;
    if (line.busy || line.waiting.empty() || shut_down_) return batch;
    line.busy = true;
    // Meters book in one batch, decided in order; otherwise the head alone checks.
    const size_t n = books_slots_ ? line.waiting.size() : 1;
    for (size_t i = 0; i < n; ++i) {
      WaiterPtr w = std::move(line.waiting.front());
      line.waiting.pop_front();
      w->phase = Phase::kChecking;
      if (w->timer) {
        timers_.Cancel(*w->timer);
        w->timer.reset();
      }
      batch.waiters.push_back(std::move(w));
    }
    return batch;
  }

  void Send(Batch batch) EXCLUDES(mu_) {
    if (batch.waiters.empty()) return;
    const Time now = timers_.now();
    const Duration most = MaxDelayOf(limiter_.limit());
    std::vector<KeyCost> checks;
    checks.reserve(batch.waiters.size());
    for (const WaiterPtr& w : batch.waiters) {
      const Duration left = std::clamp(w->deadline - now, Duration(0), most);
      checks.push_back(
          {.key = w->key, .cost = w->cost, .max_delay = books_slots_ ? left : Duration(0)});
    }
    limiter_.CheckBatchAsync(checks, [self = shared_from_this(), batch = std::move(batch)](
                                         std::vector<Result<Decision>> results) {
      self->OnResults(batch, std::move(results));
    });
  }

  void OnResults(const Batch& batch, std::vector<Result<Decision>> results) {
    Completions completions;
    Batch next;
    {
      core::MutexLock lock(mu_);
      if (shut_down_) return;
      const std::string& key = batch.waiters.front()->key;
      Line& line = lines_.at(key);
      const Time now = timers_.now();
      bool head_sleeps = false;
      for (size_t i = 0; i < batch.waiters.size(); ++i) {
        const WaiterPtr& w = batch.waiters[i];
        Result<Decision>& r = results[i];
        if (r.ok()) w->last = *r;
        if (w->cancelled) {
          Finish(w, AcquireOutcome::kCancelled, w->last, completions);
        } else if (!r.ok()) {
          Fail(w, r.status(), completions);
        } else if (r->allowed && r->delay.count() == 0) {
          Finish(w, AcquireOutcome::kAdmitted, *r, completions);
        } else if (r->allowed) {
          w->phase = Phase::kBooked;
          w->timer = timers_.Start(
              r->delay, [self = shared_from_this(), id = w->id] { self->OnSlotCame(id); });
        } else {
          line.last_denial = *r;
          // The wait cannot come sooner than retry_after, nor a slot be booked closer.
          if (books_slots_ || now + r->retry_after > w->deadline) {
            Finish(w, AcquireOutcome::kDenied, *r, completions);
          } else {
            w->phase = Phase::kSleeping;
            w->timer = timers_.Start(
                r->retry_after, [self = shared_from_this(), id = w->id] { self->OnRetry(id); });
            head_sleeps = true;
          }
        }
      }
      line.busy = head_sleeps;
      next = TakeBatch(line);
      EraseLineIfIdle(key);
    }
    Run(completions);
    Send(std::move(next));
  }

  void OnSlotCame(AcquireId id) {
    Completions completions;
    {
      core::MutexLock lock(mu_);
      auto it = waiters_.find(id);
      if (it == waiters_.end() || it->second->phase != Phase::kBooked) return;
      WaiterPtr w = it->second;
      w->timer.reset();
      Finish(w, AcquireOutcome::kAdmitted, w->last, completions);
      EraseLineIfIdle(w->key);
    }
    Run(completions);
  }

  void OnRetry(AcquireId id) {
    Batch next;
    {
      core::MutexLock lock(mu_);
      auto it = waiters_.find(id);
      if (it == waiters_.end() || it->second->phase != Phase::kSleeping) return;
      WaiterPtr w = it->second;
      w->timer.reset();
      w->phase = Phase::kInLine;
      Line& line = lines_.at(w->key);
      line.waiting.push_front(w);  // still the head
      line.busy = false;
      next = TakeBatch(line);
    }
    Send(std::move(next));
  }

  void OnDeadline(AcquireId id) {
    Completions completions;
    {
      core::MutexLock lock(mu_);
      auto it = waiters_.find(id);
      if (it == waiters_.end() || it->second->phase != Phase::kInLine) return;
      WaiterPtr w = it->second;
      w->timer.reset();
      Line& line = lines_.at(w->key);
      std::erase(line.waiting, w);
      Finish(w, AcquireOutcome::kDenied, line.last_denial, completions);
      EraseLineIfIdle(w->key);
    }
    Run(completions);
  }

  // Ends `w` with `outcome`.
  void Finish(const WaiterPtr& w, AcquireOutcome outcome, const Decision& decision,
              Completions& completions) REQUIRES(mu_) {
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
    completions.push_back({std::move(w->done), Acquisition{.outcome = outcome,
                                                           .decision = decision,
                                                           .waited = timers_.now() - w->start}});
    Remove(w);
  }

  void Fail(const WaiterPtr& w, Status status, Completions& completions) REQUIRES(mu_) {
    ++stats_.errors;
    completions.push_back({std::move(w->done), std::move(status)});
    Remove(w);
  }

  void Remove(const WaiterPtr& w) REQUIRES(mu_) {
    if (w->timer) {
      timers_.Cancel(*w->timer);
      w->timer.reset();
    }
    --lines_.at(w->key).in_progress;
    waiters_.erase(w->id);
  }

  void EraseLineIfIdle(const std::string& key) REQUIRES(mu_) {
    auto it = lines_.find(key);
    if (it != lines_.end() && it->second.in_progress == 0 && !it->second.busy) lines_.erase(it);
  }

  static void Run(Completions& completions) {
    for (auto& c : completions) c.done(std::move(c.result));
  }

  Limiter& limiter_;
  Timers& timers_;
  const AcquirerOptions options_;
  const bool books_slots_;

  // Also guards the Waiters (held by waiters_ and the lines) but what is fixed when they start:
  // their id, key, cost, start and deadline.
  mutable core::Mutex mu_;
  bool shut_down_ GUARDED_BY(mu_) = false;
  AcquireId next_id_ GUARDED_BY(mu_) = 1;
  std::unordered_map<AcquireId, WaiterPtr> waiters_ GUARDED_BY(mu_);
  std::unordered_map<std::string, Line> lines_ GUARDED_BY(mu_);
  AcquirerStats stats_ GUARDED_BY(mu_);
};

Acquirer::Acquirer(Limiter& limiter, Timers& timers, AcquirerOptions options)
    : state_(std::make_shared<State>(limiter, timers, options)) {}

Acquirer::~Acquirer() { state_->Shutdown(); }

AcquireId Acquirer::AcquireAsync(std::string_view key, int64_t cost, Duration max_wait,
                                 AcquireCallback done) {
  return state_->Start(key, cost, max_wait, std::move(done));
}

Result<Acquisition> Acquirer::Acquire(std::string_view key, int64_t cost, Duration max_wait) {
  return core::Await<Result<Acquisition>>(
      [&](auto done) { AcquireAsync(key, cost, max_wait, std::move(done)); });
}

bool Acquirer::Cancel(AcquireId id) { return state_->Cancel(id); }

void Acquirer::CancelAll() { state_->CancelAll(); }

AcquirerStats Acquirer::stats() const { return state_->stats(); }

const Limiter& Acquirer::limiter() const { return state_->limiter(); }

}  // namespace sluice
