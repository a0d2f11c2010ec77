// A connection's deadlines: one timer at the oldest unfinished deadline, and whose fault a missed
// one is (Redis's: DEADLINE_EXCEEDED, an outage for the failure policy; this process's own queue:
// RESOURCE_EXHAUSTED). connection.cc's opening comment says how the deadlines are ordered.

#include <algorithm>

#include "redis/connection.h"

namespace sluice::redis {

// Makes the timer fire by `at` (or keeps it firing earlier).
void Connection::ArmDeadlineTimer(Steady::time_point at) {
  if (at == Steady::time_point::max() || (timer_armed_ && timer_at_ <= at)) return;
  timer_armed_ = true;
  timer_at_ = at;
  deadline_timer_.expires_at(at);  // a wait armed for later completes as aborted and is ignored
  deadline_timer_.async_wait(
      [this, self = shared_from_this(), gen = ++timer_generation_](boost::system::error_code ec) {
        if (gen != timer_generation_) return;
        timer_armed_ = false;
        if (ec || stopping_) return;
        ExpireCalls();
      });
}

Status Connection::DeadlineStatus() const {
  return Status::DeadlineExceeded("no reply from Redis at " + Address() + " within " +
                                  std::to_string(options_.timeout.count() / 1000) + " ms");
}

Status Connection::ExpiredStatus(const Pending& call, Steady::time_point deadline,
                                 Steady::time_point now) const {
  const auto half = (deadline - call.queued_at) / 2;
  // A deadline that passed before the call was queued (its caller stalled) is this process's.
  const bool queued_in_time = half > Steady::duration::zero();
  const bool redis_had_it = queued_in_time && call.sent_at != Steady::time_point::max() &&
                            call.sent_at + half <= deadline;
  // Redis neither reads what this connection writes nor answers anything.
  const bool write_not_taken =
      queued_in_time && writing_active_ && write_started_ + half <= now && last_read_ + half <= now;
  if (redis_had_it || write_not_taken) return DeadlineStatus();
  return Status::ResourceExhausted(
      "the check waited in this process's own queue to Redis at " + Address() +
      " for more than half the time to its deadline: this instance is overloaded (not Redis); "
      "retry later");
}

void Connection::ExpireMembers(Pending& call, Steady::time_point now, Steady::time_point& next) {
  Steady::time_point earliest = Steady::time_point::max();
  for (auto& m : call.members) {
    if (m.finished) continue;
    if (m.deadline > now) {
      earliest = std::min(earliest, m.deadline);
      continue;
    }
    m.finished = true;
    m.done(ExpiredStatus(call, m.deadline, now));
  }
  call.finished = earliest == Steady::time_point::max();
  if (!call.finished) call.deadline = earliest;
  next = std::min(next, earliest);
}

// Deferred (asio::defer: behind the handlers already queued on this thread, among them a read's
// completion whose bytes Read() took at once), so that the replies read by then are answered
// first.
void Connection::ExpireAfterReads() {
  asio::defer(io_, [this, self = shared_from_this(), gen = generation_] {
    if (gen == generation_ && !stopping_) ExpireCalls(/*replies_read=*/true);
  });
}

void Connection::ExpireCalls(bool replies_read) {
  const auto now = Steady::now();
  if (!replies_read && !expire_after_read_ && ConnectedOnIoThread()) {
    boost::system::error_code ec;
    const size_t at_hand = transport_.socket().available(ec);
    if (!ec && at_hand > 0) {
      // The read handler reads them and calls back; the timer only if it does not.
      expire_after_read_ = true;
      bytes_at_hand_ = at_hand;
      return ArmDeadlineTimer(now + options_.timeout);
    }
    return ExpireAfterReads();
  }
  expire_after_read_ = false;
  std::optional<CoalescingGroup::Release> let_go;
  // When the coalescing call is let go while it is held.
  Steady::time_point next = Steady::time_point::max();
  {
    base::MutexLock lock(mu_);
    if (!group_.empty() && group_.deadline() <= now) {
      let_go = CoalescingGroup::Release::kAtDeadline;
    } else if (!group_.empty() && group_.hold_limit() <= now) {
      let_go = CoalescingGroup::Release::kOther;
    } else if (!group_.empty()) {
      next = group_.hold_limit();
    }
  }
  if (let_go) Flush(let_go);  // into inflight_, where its checks expire
  for (auto& p : inflight_) {
    if (p.finished) continue;
    if (!p.members.empty()) {
      ExpireMembers(p, now, next);
      continue;
    }
    if (p.deadline > now) {
      next = std::min(next, p.deadline);
      if (out_of_order_in_flight_ == 0) break;  // deadlines grow along the queue but for these
      continue;
    }
    p.finished = true;
    p.done(ExpiredStatus(p, p.deadline, now));
  }
  if (inflight_.empty()) return ArmDeadlineTimer(next);
  // Hung: the oldest call is past its deadline and nothing was read for hang_timeout since.
  const auto hung_at = std::max(last_read_, inflight_.front().deadline) + options_.hang_timeout;
  if (hung_at <= now) {
    return Disconnect("Redis did not answer for " +
                      std::to_string(options_.hang_timeout.count() / 1000) + " ms");
  }
  ArmDeadlineTimer(std::min(next, hung_at));
}

}  // namespace sluice::redis
