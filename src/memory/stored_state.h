// StoredState: a key's limiter state as MemoryStore's table keeps it: any of the six algorithms'
// states in 32 bytes, with the algorithm (the state's kind) kept in the table slot's flags
// rather than beside it, so that a key of up to 20 bytes, its expiry and its state fit one cache
// line. sliding_log's entries stay on the heap, counted by HeapBytes.
//
// Thread safety: plain data; the table's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/slot_memory.h"
#include "core/algorithms.h"
#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::memory {

union StoredState {
  core::FixedWindowState fixed_window;
  core::SlidingLogState sliding_log;
  core::SlidingWindowState sliding_window;
  core::TokenBucketState token_bucket;
  core::LeakyBucketState leaky_bucket;
  core::GcraState gcra;

  StoredState() {}
  ~StoredState() {}
};
static_assert(sizeof(StoredState) == 32);

// The kind of a state: its algorithm's index in the Algorithm enum, as core::State's.
inline uint8_t KindOf(Algorithm algorithm) { return static_cast<uint8_t>(algorithm); }

// What sliding_log's entries take on the heap.
inline size_t LogBytes(const core::SlidingLogState& log) {
  return base::ChunkBytes(log.entries.capacity() * sizeof(core::SlidingLogState::Entry));
}

struct StoredStateTraits {
  static void Relocate(uint8_t kind, StoredState& from, StoredState* to) noexcept;
  static void Destroy(uint8_t kind, StoredState& state) noexcept;
  static size_t HeapBytes(uint8_t kind, const StoredState& state) noexcept {
    return kind == KindOf(Algorithm::kSlidingLog) ? LogBytes(state.sliding_log) : 0;
  }
};

// The heap a state of the variant form holds, as HeapBytes counts it once stored.
size_t HeapBytes(const core::State& state);

// Constructs `to` (raw storage) from `state`; returns its kind.
uint8_t Construct(core::State&& state, StoredState* to);
// A copy of a stored state in the variant form.
core::State Load(uint8_t kind, const StoredState& state);

// core::InRange on a stored state of kind `kind`.
bool InRange(const Limit& limit, uint8_t kind, const StoredState& state, int64_t now);

// core::Decide on a stored state: one of another algorithm (the limit of a scope changed), or out
// of range (core::InRange), is replaced by a fresh one first, and `kind` follows.
Decision DecideStored(const Limit& limit, uint8_t& kind, StoredState& state, int64_t now,
                      int64_t cost, int64_t max_delay);

// core::GiveBack on a stored state of the meter `limit` names (the caller checked its kind and
// that it is in range: a foreign state is left as it is); returns its reset_after.
int64_t GiveBackStored(const Limit& limit, StoredState& state, int64_t now, int64_t units);

}  // namespace sluice::memory
