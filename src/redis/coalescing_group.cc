#include "redis/coalescing_group.h"

#include <algorithm>

namespace sluice::redis {

bool CoalescingGroup::Takes(const CoalescedCheck& check) const {
  return many_ == check.many && across_slots_ == check.across_slots && members_.size() < check.max;
}

bool CoalescingGroup::Join(CoalescedCheck& check, Steady::time_point now) {
  const bool starts = members_.empty();
  if (starts) {
    many_ = check.many;
    across_slots_ = check.across_slots;
    deadline_ = check.deadline;
    started_ = now;
  }
  call_.Add(check.words);
  deadline_ = std::min(deadline_, check.deadline);
  members_.push_back({.done = std::move(check.done), .deadline = check.deadline});
  return starts;
}

void CoalescingGroup::HoldBehindReplies(Steady::time_point now) {
  held_since_ = std::min(held_since_, now);
}

CoalescingGroup::Call CoalescingGroup::Close(Release release, Steady::time_point now) {
  Call call;
  call.many = many_;
  call_.Finish(*many_, across_slots_, call.command);
  call.members = std::move(members_);
  members_.clear();
  call.deadline = deadline_;
  call.started = started_;
  if (release == Release::kAtDeadline || now < deadline_) call.sent_at = held_since_;
  if (release == Release::kOther && held_since_ != Steady::time_point::max()) {
    call.hold_counts_by = deadline_;
  }
  held_since_ = Steady::time_point::max();
  return call;
}

}  // namespace sluice::redis
