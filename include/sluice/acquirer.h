// Acquirer: waiting for a limit instead of being refused (shaping, as opposed to policing).
// Acquire(key, cost, max_wait) admits at once when the limit allows; otherwise it waits for the
// request's turn, up to max_wait, and only then answers:
//   - on token_bucket, leaky_bucket and gcra the waiter books its slot in the store, in the same
//     atomic step as the decision (Limiter::Reserve), and completes when the slot comes. Waiters
//     on one key, in this process or in any process sharing a Redis store, are admitted in
//     booking order, one emission interval apart, with no race when they wake. A slot further
//     than max_wait is refused at once: waiting could not bring it closer;
//   - on the window algorithms, nothing can be booked: the waiter sleeps until the denial's
//     retry_after and checks again, for as long as max_wait allows.
// Within this process a key's waiters are served first come, first served: only the head of a
// key's line checks the store (on the meters, the whole line books in one batch, in order).
// max_wait bounds the wait for the slot; a store call in flight for the key comes on top.
//
// Waiting costs a timer, never a thread or a polling loop: Timers (sluice/timers.h) is where
// waiters sleep, AsioTimers on an io_context in production, ManualTimers on a ManualClock in tests.
//
// Bounds: `max_waiters_per_key` and `max_waiters` count the acquires in progress (in line, in a
// store call, or sleeping until their slot or their next check). Beyond either bound an acquire
// is refused at once, without a store call, with AcquireOutcome::kQueueFull.
//
// Cancel: an acquire still in line or sleeping before a retry ends with kCancelled and has
// consumed nothing. An acquire whose slot is booked ends with kCancelled too, but its slot STAYS
// CONSUMED: it is not given back to the store, since later waiters have booked behind it, and
// handing it to a newcomer would admit more than the rate at that instant. An acquire cancelled
// during its store call ends with kCancelled when the store answers, keeping whatever the store
// consumed for it.
//
// Thread safety: all methods may be called from any thread. A callback runs exactly once: on
// the calling thread (refused at once, or decided inline by a MemoryStore), on a store thread or
// on the timers' thread; it must not block. The Limiter and the Timers must outlive the Acquirer;
// destroying the Acquirer ends every acquire in progress with kCancelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limiter.h"
#include "sluice/status.h"
#include "sluice/timers.h"

namespace sluice {

enum class AcquireOutcome : uint8_t {
  kAdmitted,   // the request may proceed now
  kDenied,     // the limit would not admit it within max_wait
  kQueueFull,  // refused at once: too many acquires in progress, for the key or in all
  kCancelled,  // Cancel, or the Acquirer's destruction, ended it first
};

// "admitted", "denied", "queue_full", "cancelled".
const char* AcquireOutcomeName(AcquireOutcome outcome);

struct Acquisition {
  AcquireOutcome outcome = AcquireOutcome::kDenied;
  // The store's last decision for this acquire: when admitted, an allowed decision (its delay
  // is the wait for a booked slot); when denied, the refusal, with its retry_after counted from
  // when it was made. A default Decision when no check was made (kQueueFull, kCancelled in line).
  Decision decision;
  // From the call to the completion, by the timers' clock.
  Duration waited{0};

  bool admitted() const { return outcome == AcquireOutcome::kAdmitted; }
};

using AcquireCallback = std::function<void(Result<Acquisition>)>;
using AcquireId = uint64_t;

struct AcquirerOptions {
  size_t max_waiters_per_key = 1'000;
  size_t max_waiters = 100'000;
};

// Counters since construction, and the acquires in progress now.
struct AcquirerStats {
  uint64_t admitted = 0;
  uint64_t denied = 0;
  uint64_t queue_full = 0;
  uint64_t cancelled = 0;
  uint64_t errors = 0;
  size_t in_progress = 0;
};

class Acquirer {
 public:
  Acquirer(Limiter& limiter, Timers& timers, AcquirerOptions options = {});
  ~Acquirer();
  Acquirer(const Acquirer&) = delete;
  Acquirer& operator=(const Acquirer&) = delete;

  // Errors (the callback's Result): INVALID_ARGUMENT (bad key or cost, negative max_wait),
  // COST_EXCEEDS_LIMIT, or the store's own error, which ends the acquire. Returns an id for
  // Cancel: 0 when refused before reaching the store (bad input, kQueueFull).
  AcquireId AcquireAsync(std::string_view key, int64_t cost, Duration max_wait,
                         AcquireCallback done);
  // Blocks until the acquire ends. Must not be called on a thread the Timers fire on.
  Result<Acquisition> Acquire(std::string_view key, int64_t cost, Duration max_wait);

  // Ends the acquire with kCancelled (see the top of this file for what it keeps). False when
  // it had already ended or the id is unknown.
  bool Cancel(AcquireId id);
  // Cancels every acquire in progress, as Cancel does each (for a drain: the process is about to
  // stop). Acquires started afterwards are served as usual.
  void CancelAll();

  AcquirerStats stats() const;
  const Limiter& limiter() const;

 private:
  class State;
  std::shared_ptr<State> state_;
};

}  // namespace sluice
