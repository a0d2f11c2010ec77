// FairAdmission: an instance-wide budget of store work in flight (checks sent to the store and
// not yet answered), shared between the callers of one process (an HTTP connection, a gRPC peer),
// so that one caller's queued work cannot push another's check past its deadline.
//
// A request of `units` (its checks) from a caller holding `held` units in flight, while the
// instance holds `total`, with `active` callers holding work (the requester counted), is
// admitted when:
//   1. total + units <= budget: the instance has room; or
//   2. held + units <= budget / active and total + units <= budget + budget / 4: the caller
//      stays within an equal share, out of a reserve of a quarter of the budget; or
//   3. units == 1 and held == 0: a single check of a caller holding nothing always goes; or
//   4. total == 0 and the request is whole (not `partial`, below): a request that cannot be
//      split, such as a rate limit service call of up to 256 checks, goes to an idle instance
//      even when the budget has shrunk below it.
// Anything else is refused at once (the caller answers it 503 with Retry-After: it is never sent,
// so never admitted, and never queued to miss its deadline). A request may instead ask for part
// of its units (Admit's `partial`): it gets as many as the rules allow, for the caller to send
// the rest once they are answered. So the work queued ahead of any check is at most 1.25 *
// budget units, or one request that came to an idle instance, plus one check per other caller
// holding a single one; and a caller holding nothing always gets a single check through.
//
// The budget adapts to how fast the store answers (additive increase, multiplicative decrease):
// a request answered later than `target` (half the store's deadline) cuts it by a quarter, once
// per cut (a request admitted before the last cut does not cut again), down to `min_budget`; one
// answered within half of `target` raises it by 1, up to `max_budget`. A loaded machine, where
// Redis answers ten times slower, so keeps the queue within the deadline.
//
// An admitted request holds its units until its Ticket is released or answered (or destroyed).
// Nothing here knows what a check decides; the units are only counted.
//
// Thread safety: Admit and the accessors may be called from any thread; a Ticket is owned by one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "sluice/clock.h"

namespace sluice::core {

struct FairAdmissionOptions {
  // A check takes Redis a few microseconds: 256 is about a millisecond of its time, and many
  // times that on a loaded machine.
  size_t max_budget = 256;
  size_t min_budget = 16;
  Duration target = std::chrono::milliseconds(25);
};

class FairAdmission {
 public:
  // Who a request comes from: an HTTP connection's id, a hash of a gRPC peer. 0 is a caller too.
  using Caller = uint64_t;

  // Retry-After of a refusal, in seconds: the work in flight is answered within the store's
  // deadline, far less.
  static constexpr int kRetryAfterSeconds = 1;

  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }

    // Whether the request was admitted (and holds its units until released).
    bool admitted() const { return owner_ != nullptr; }
    explicit operator bool() const { return admitted(); }
    // The units admitted (all those asked, unless partial); 0 if refused.
    size_t units() const { return owner_ != nullptr ? units_ : 0; }
    // Gives the units back, the store having answered them in `latency` (which adapts the
    // budget); nothing if not admitted or already given back.
    void Answered(Duration latency);
    // Gives the units back, saying nothing of the store.
    void Release();

   private:
    friend class FairAdmission;
    FairAdmission* owner_ = nullptr;
    Caller caller_ = 0;
    size_t units_ = 0;
    uint64_t cuts_ = 0;  // the budget's cuts when admitted
  };

  explicit FairAdmission(FairAdmissionOptions options = {});

  // Admits `units` (at least 1 counted) for `caller` by the rules above, or refuses them. With
  // `partial`, admits as many of them as the rules allow, at least 1, or refuses.
  Ticket Admit(Caller caller, size_t units, bool partial = false);

  size_t budget() const;
  size_t in_flight() const;
  uint64_t refused() const;

 private:
  void Release(const Ticket& ticket, const Duration* latency);

  const FairAdmissionOptions options_;
  // Not base::Mutex: this header is included beside gRPC's, whose abseil defines the same
  // annotation macros.
  mutable std::mutex mu_;
  std::unordered_map<Caller, size_t> held_;  // the callers holding units, and only them
  size_t budget_;
  size_t total_ = 0;
  uint64_t cuts_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace sluice::core
