// CoalescingGroup: the call gathering checks at the tail of one connection's queue
// (Connection::SubmitCoalesced), and when the time it was held back counts as Redis's.
//
// A connection holds the call while its calls ahead await their replies (Connection::Flush): the
// checks that arrive meanwhile share it. A write completes as soon as the kernel takes the bytes,
// long before Redis answers: a call that left then would carry the few checks of callers that
// each wait for their previous answer (HTTP clients on keep-alive connections), and Redis would
// spend its time starting scripts; the client's other connection keeps Redis busy meanwhile.
// When a deadline of its checks passes, what it is answered depends on whose time that was
// (Connection::ExpiredStatus), so the call carries, as the time Redis had it, when it was first
// held behind calls Redis had and had not answered, unless this process let it go late (Close
// says when).
//
// Thread safety: none; its connection uses it under the lock of its queue.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "redis/resp.h"
#include "redis/script_call.h"

namespace sluice::redis {

using Steady = std::chrono::steady_clock;

// One check of a coalesced call (Client::EvalShaCoalesced), with its own deadline and reply.
struct CoalescedMember {
  ReplyCallback done;
  Steady::time_point deadline;
  bool finished = false;  // the callback ran (deadline passed)
};

// A check to coalesce (Client::EvalShaCoalesced): its words (script_call.h) and its grouping.
struct CoalescedCheck {
  const Script* many = nullptr;
  bool across_slots = false;
  CoalescedCheckWords words;
  ReplyCallback done;
  Steady::time_point deadline;
  size_t max = 1;  // ClientOptions::coalesce_max
};

class CoalescingGroup {
 public:
  // What lets a held call go.
  enum class Release {
    // Its earliest deadline, with no reply at hand on the connection: Redis had not answered.
    kAtDeadline,
    // Anything else: the replies it waited for were read, its hold limit passed, it filled up, a
    // command was queued behind it.
    kOther,
  };

  // The call, closed.
  struct Call {
    const Script* many = nullptr;
    std::string command;  // its EVALSHA
    std::vector<CoalescedMember> members;
    Steady::time_point deadline;  // the members' earliest
    Steady::time_point started;   // when its first member joined
    // When Redis had the call as Connection::ExpiredStatus counts it: since it was first held
    // behind calls Redis had, or max (since its write, which the connection stamps).
    Steady::time_point sent_at = Steady::time_point::max();
    // Written later than this (its earliest deadline, when let go before it by anything but that
    // deadline), the call waited in this process since it was let go (a stall), and counts from
    // its write.
    Steady::time_point hold_counts_by = Steady::time_point::max();
  };

  bool empty() const { return members_.empty(); }
  Steady::time_point deadline() const { return deadline_; }
  // When a held call leaves though the calls ahead are unanswered: an eighth of the way to its
  // earliest deadline. Behind a Redis that answers late, held checks would wait one answer and
  // then their own: they are still decided when Redis answers within seven eighths of their time.
  Steady::time_point hold_limit() const { return started_ + (deadline_ - started_) / 8; }
  // Whether `check` may join: the same script and layout (CoalescibleCall::across_slots), and
  // room left.
  bool Takes(const CoalescedCheck& check) const;
  // Adds the check (Takes, or empty); true when it starts the call.
  bool Join(CoalescedCheck& check, Steady::time_point now);
  // The call waits behind calls whose bytes Redis has and has not answered: from `now` unless it
  // already did.
  void HoldBehindReplies(Steady::time_point now);
  // The call (not empty), and starts over. The time it was held counts as Redis's when its
  // deadline let it go, or anything did before that deadline and it was written by then; let go
  // or written after it otherwise, the replies it waited for were at hand and this process read
  // them late (a stall, a starved CPU): that wait was this process's, and it counts from its
  // write.
  Call Close(Release release, Steady::time_point now);

 private:
  const Script* many_ = nullptr;
  bool across_slots_ = false;
  CoalescedCallBuilder call_;
  std::vector<CoalescedMember> members_;
  Steady::time_point deadline_;
  Steady::time_point started_;
  Steady::time_point held_since_ = Steady::time_point::max();
};

}  // namespace sluice::redis
