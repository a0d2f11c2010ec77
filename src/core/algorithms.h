// The six rate-limiting algorithms as pure functions on a small state. Nothing here reads a
// clock, allocates (but for sliding_log's entries) or locks: a store owns the state, serialises
// access to it and passes `now`.
//
// Contract of every Decide(limit, state, now, cost):
//   - 0 <= cost <= limit.capacity() (the store validated it); cost 0 peeks: the decision says
//     whether one unit would be admitted, and consumes nothing;
//   - the state is written only when a request with cost > 0 is admitted (and sliding_log drops
//     the entries that left its window), exactly as the Redis store writes its keys, so both
//     stores keep equivalent states whatever the limit does next;
//   - the limit may differ from the one the state was written under (a rule changed): the state
//     is read under the new parameters, never counting a remembered unit for less than they do
//     (a count above a lowered limit stays until it drains, tokens above a lowered burst are
//     clamped to it, window counts go to the window they may belong to under a new period);
//   - a state stamped later than `now` (a clock behind the one that wrote it) is current: it is
//     never reset, and what it holds counts until the clock catches up;
//   - decision.reset_after is when the state becomes equivalent to a fresh one: a store may drop
//     the key then (or not keep it at all when reset_after is zero);
//   - every call costs O(log n) in the state's size (sliding_log), plus the entries it drops.
// The meters (token_bucket, leaky_bucket, gcra) also take `max_delay` >= 0: a request with a cost
// that does not fit now but would after a wait <= max_delay is booked (consumed now, allowed,
// decision.delay = the wait); beyond it, retry_after is the wait minus max_delay. Booking lets
// the state run past its capacity: tokens below zero, a level above the capacity, a TAT beyond
// now + tolerance.
// Times are microseconds since the epoch (>= 0). docs/algorithms.md gives each formula; the Lua
// scripts of the Redis store compute the same numbers with the same operations.
#pragma once

#include <cassert>
#include <cstdint>
#include <variant>
#include <vector>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::core {

struct FixedWindowState {
  int64_t latest = 0;  // the latest admission; `count` is of its window
  int64_t count = 0;
};

struct SlidingLogState {
  struct Entry {
    int64_t at;     // admission time; simultaneous admissions share one entry
    int64_t count;  // running count: the units admitted to the key up to this entry, included
  };
  // Oldest first: `at` never decreases, `count` increases, so an entry's cost is its count minus
  // the previous one's and the units in the window are counted without a scan. The entries
  // before first_live have left the window; they are erased in bulk once they are half of the
  // vector, but for the last one, whose count is then the units that left.
  std::vector<Entry> entries;
  size_t first_live = 0;
};

struct SlidingWindowState {
  int64_t window_start = 0;
  int64_t latest = 0;    // the latest admission counted in `current`
  int64_t previous = 0;  // units admitted in the window before window_start
  int64_t current = 0;   // units admitted since window_start
};

struct TokenBucketState {
  int64_t tokens = 0;
  int64_t refilled_at = 0;  // tokens are whole; the time of a partial token is kept here
};

struct LeakyBucketState {
  int64_t level = 0;
  int64_t drained_at = 0;
};

struct GcraState {
  int64_t theoretical_arrival = 0;
};

Decision Decide(const Limit& limit, FixedWindowState& state, int64_t now, int64_t cost);
Decision Decide(const Limit& limit, SlidingLogState& state, int64_t now, int64_t cost);
Decision Decide(const Limit& limit, SlidingWindowState& state, int64_t now, int64_t cost);
Decision Decide(const Limit& limit, TokenBucketState& state, int64_t now, int64_t cost,
                int64_t max_delay = 0);
Decision Decide(const Limit& limit, LeakyBucketState& state, int64_t now, int64_t cost,
                int64_t max_delay = 0);
Decision Decide(const Limit& limit, GcraState& state, int64_t now, int64_t cost,
                int64_t max_delay = 0);

// Decide on any one algorithm's state, for code that picks the state's type at run time.
// `max_delay` must be 0 unless the algorithm can book (the store validated it).
template <typename AlgorithmState>
Decision DecideOn(const Limit& limit, AlgorithmState& state, int64_t now, int64_t cost,
                  int64_t max_delay) {
  if constexpr (requires { Decide(limit, state, now, cost, max_delay); }) {
    return Decide(limit, state, now, cost, max_delay);
  } else {
    assert(max_delay == 0);
    return Decide(limit, state, now, cost);
  }
}

// Gives back `units` (1 <= units <= capacity) a meter consumed and did not use: refilled or drained
// to `now` as a check would, the state gets them back (tokens up to the capacity, a level down to
// zero, a TAT back to now at the earliest), so that it is never fresher than fresh. A booked-ahead
// state follows the same formulas. Returns the state's reset_after, as a decision's: 0 when it is
// equivalent to fresh (a store then drops the key). The Lua give_back sections compute the same.
//
// This undoes the consumption exactly only while the meter without it would not have been full at
// any time it was looked at since (a check, or now): a full meter wastes its refill, which a state
// holding the units did not, so what the give-back returns may then already have come back. It
// then admits more than the meter without the consumption by at most what the meter refills from
// the consumption to the give-back, ceil(elapsed / emission interval) units (and at most `units`).
int64_t GiveBack(const Limit& limit, TokenBucketState& state, int64_t now, int64_t units);
int64_t GiveBack(const Limit& limit, LeakyBucketState& state, int64_t now, int64_t units);
int64_t GiveBack(const Limit& limit, GcraState& state, int64_t now, int64_t units);

// The bounds of every value a state can hold: counts up to Limit::kMaxCount (sliding_log's up to
// Limit::kMaxSlidingLogCount), times from 0 to kMaxStateAhead past `now` (a meter's tolerance and
// a booking, each up to Limit::kMaxPeriod, and a clock up to as much behind the one that wrote
// it), and a meter's units beyond its capacity (booked ahead, or above a burst lowered since) no
// more than drain at the limit's rate in kMaxStateAhead. A state outside them is never written by
// Decide, under this limit or another one within reason, so only a damaged store holds one; the
// stores read it as a foreign state (another algorithm's): as a fresh one. They also keep every
// wait within 64 bits. The Redis scripts apply the same bounds to what they read from a key
// (src/redis/lua/common.lua). O(1): of sliding_log's entries, only the newest is looked at, and
// the count of the units in the window.
inline constexpr int64_t kMaxStateAhead = 3 * Limit::kMaxPeriod.count();
bool InRange(const Limit& limit, const FixedWindowState& state, int64_t now);
bool InRange(const Limit& limit, const SlidingLogState& state, int64_t now);
bool InRange(const Limit& limit, const SlidingWindowState& state, int64_t now);
bool InRange(const Limit& limit, const TokenBucketState& state, int64_t now);
bool InRange(const Limit& limit, const LeakyBucketState& state, int64_t now);
bool InRange(const Limit& limit, const GcraState& state, int64_t now);

// Any algorithm's state. The alternative's index follows the Algorithm enum.
using State = std::variant<FixedWindowState, SlidingLogState, SlidingWindowState, TokenBucketState,
                           LeakyBucketState, GcraState>;

// The state of a key never seen (or whose state expired), at `now`.
State FreshState(const Limit& limit, int64_t now);

// Decides on `state` with the limit's algorithm. A state of another algorithm (the limit of a
// scope changed), or one out of range (InRange), is replaced by a fresh one first. `max_delay` must
// be 0 unless the algorithm can book (the store validated it).
Decision Decide(const Limit& limit, State& state, int64_t now, int64_t cost, int64_t max_delay = 0);

}  // namespace sluice::core
