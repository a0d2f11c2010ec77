// StoreMemory: what a store keeping its state in this process's memory tells of that memory,
// for metrics: the bytes it holds against its bound, and the states it dropped to stay within it.
// MemoryStore implements it, so the HTTP layer can report it without knowing the store's type.
//
// Thread safety: memory_stats() may be called concurrently with anything, from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice {

struct StoreMemoryStats {
  size_t keys = 0;
  // Allocated now: the tables' slots, out-of-line keys and sliding_log entries.
  size_t bytes = 0;
  size_t max_bytes = 0;
  // States dropped once back to fresh: dropping one changes no decision.
  uint64_t evicted_fresh = 0;
  // Live states evicted, least recently used first, to stay within the bound: each such key's
  // next check starts from a fresh state.
  uint64_t evicted_lru = 0;
};

class StoreMemory {
 public:
  virtual ~StoreMemory() = default;

  virtual StoreMemoryStats memory_stats() const = 0;
};

}  // namespace sluice
