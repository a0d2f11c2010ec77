// Timers: where a waiter sleeps. A timer runs a callback once, after a delay counted on the
// timers' own clock, unless it is cancelled first; waiting costs a timer, never a thread or a
// polling loop. AsioTimers run on an Asio io_context in production; ManualTimers run on a
// ManualClock in tests, firing only when the test advances them. Acquirer waits on them.
//
// Thread safety: every method of every Timers may be called from any thread; a callback never
// runs inline, inside the Start that scheduled it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "sluice/clock.h"

namespace boost::asio {
class io_context;
}

namespace sluice {

// Runs callbacks after a delay.
class Timers {
 public:
  using Id = uint64_t;
  virtual ~Timers() = default;
  // The time the delays are counted from.
  virtual Time now() const = 0;
  // Runs `fire` once, `after` from now (never inline). Returns an id for Cancel.
  virtual Id Start(Duration after, std::function<void()> fire) = 0;
  // Makes sure `fire` does not run if it has not started yet.
  virtual void Cancel(Id id) = 0;
};

// Timers on an Asio io_context: callbacks run on the threads that run it. The context must
// outlive this object, and this object the timers it started.
class AsioTimers final : public Timers {
 public:
  explicit AsioTimers(boost::asio::io_context& io);
  ~AsioTimers() override;
  AsioTimers(const AsioTimers&) = delete;
  AsioTimers& operator=(const AsioTimers&) = delete;

  Time now() const override;  // the system clock's
  Id Start(Duration after, std::function<void()> fire) override;
  void Cancel(Id id) override;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Timers on a ManualClock, for tests: nothing fires until Advance, which moves the clock and
// runs the due callbacks in time order (ties in start order), each with the clock set to its
// deadline, on the thread calling Advance.
class ManualTimers final : public Timers {
 public:
  explicit ManualTimers(ManualClock& clock);
  ~ManualTimers() override;
  ManualTimers(const ManualTimers&) = delete;
  ManualTimers& operator=(const ManualTimers&) = delete;

  Time now() const override;
  Id Start(Duration after, std::function<void()> fire) override;
  void Cancel(Id id) override;

  // Moves the clock `by` forward, firing what falls due on the way (Advance(0) fires what is due
  // now, including timers started by the callbacks it runs).
  void Advance(Duration by);
  // Timers started and neither fired nor cancelled.
  size_t pending() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
