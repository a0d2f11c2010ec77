#include "core/fair_admission.h"

#include <algorithm>
#include <utility>

namespace sluice::core {

FairAdmission::Ticket& FairAdmission::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    caller_ = other.caller_;
    units_ = other.units_;
    cuts_ = other.cuts_;
  }
  return *this;
}

void FairAdmission::Ticket::Answered(Duration latency) {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->Release(*this, &latency);
}

void FairAdmission::Ticket::Release() {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->Release(*this, nullptr);
}

FairAdmission::FairAdmission(FairAdmissionOptions options)
    : options_([&] {
        options.max_budget = std::max<size_t>(options.max_budget, 1);
        options.min_budget = std::clamp<size_t>(options.min_budget, 1, options.max_budget);
        return options;
      }()),
      budget_(options_.max_budget) {}

FairAdmission::Ticket FairAdmission::Admit(Caller caller, size_t units, bool partial) {
  units = std::max<size_t>(units, 1);
  std::lock_guard lock(mu_);
  const auto it = held_.find(caller);
  const size_t held = it == held_.end() ? 0 : it->second;
  const size_t active = held_.size() + (held == 0 ? 1 : 0);
  const auto left = [](size_t bound, size_t used) { return bound > used ? bound - used : 0; };
  // The most each rule lets through.
  const size_t room = left(budget_, total_);
  const size_t share = std::min(left(budget_ / active, held), left(budget_ + budget_ / 4, total_));
  const size_t lone = held == 0 ? 1 : 0;
  const size_t alone = !partial && total_ == 0 ? units : 0;
  const size_t most = std::max({room, share, lone, alone});
  const size_t granted = partial ? std::min(units, most) : (units <= most ? units : 0);
  Ticket ticket;
  if (granted == 0) {
    ++refused_;
    return ticket;
  }
  total_ += granted;
  held_[caller] = held + granted;
  ticket.owner_ = this;
  ticket.caller_ = caller;
  ticket.units_ = granted;
  ticket.cuts_ = cuts_;
  return ticket;
}

void FairAdmission::Release(const Ticket& ticket, const Duration* latency) {
  std::lock_guard lock(mu_);
  total_ -= ticket.units_;
  const auto it = held_.find(ticket.caller_);
  if (it->second == ticket.units_) {
    held_.erase(it);
  } else {
    it->second -= ticket.units_;
  }
  if (latency == nullptr) return;
  if (*latency > options_.target) {
    if (ticket.cuts_ == cuts_) {
      budget_ = std::max(options_.min_budget, budget_ - budget_ / 4);
      ++cuts_;
    }
  } else if (*latency <= options_.target / 2) {
    budget_ = std::min(options_.max_budget, budget_ + 1);
  }
}

size_t FairAdmission::budget() const {
  std::lock_guard lock(mu_);
  return budget_;
}

size_t FairAdmission::in_flight() const {
  std::lock_guard lock(mu_);
  return total_;
}

uint64_t FairAdmission::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace sluice::core
