// ShardedTable: SweptTable shards, each behind its own lock, so that work on distinct keys
// scales across cores. The lock is a base::AdaptiveMutex: it is held for about one cache miss,
// less than a waiter that slept in the kernel would cost. A key's shard is picked by bits of its
// hash that the shard's own slot index does not use. The bounds are split evenly over the shards.
//
// Thread safety: lock a shard's mutex around every use of its table; stats() and Sweep() lock
// each shard in turn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/adaptive_mutex.h"
#include "base/scoped_key.h"

namespace sluice::base {

template <class Table>
class ShardedTable {
 public:
  struct alignas(64) Shard {
    base::AdaptiveMutex mu;
    Table table SLUICE_GUARDED_BY(mu);
  };

  // `shards` must be a power of two.
  ShardedTable(size_t shards, typename Table::Limits total) SLUICE_NO_THREAD_SAFETY_ANALYSIS
      : count_(shards),
        shards_(std::make_unique<Shard[]>(shards)) {
    typename Table::Limits each = total;
    each.max_bytes = total.max_bytes / shards;
    each.max_entries = std::max<size_t>(total.max_entries / shards, 1);
    for (size_t i = 0; i < count_; ++i) shards_[i].table.set_limits(each);
  }

  size_t count() const { return count_; }
  Shard& For(size_t hash) { return shards_[base::ShardIndex(hash, count_)]; }

  // Starts loading the slots a lookup of `hash` in `shard` reads, before its lock is taken, so
  // that the cache miss overlaps the wait for the lock and whatever the caller does meanwhile.
  // The table's Prefetch reads no guarded state.
  static void Prefetch(const Shard& shard, size_t hash) SLUICE_NO_THREAD_SAFETY_ANALYSIS {
    shard.table.Prefetch(hash);
  }

  typename Table::Stats stats() const {
    typename Table::Stats total;
    for (size_t i = 0; i < count_; ++i) {
      base::AdaptiveMutexLock lock(shards_[i].mu);
      const auto s = shards_[i].table.stats();
      total.entries += s.entries;
      total.bytes += s.bytes;
      total.dropped_fresh += s.dropped_fresh;
      total.evicted_lru += s.evicted_lru;
    }
    return total;
  }

  size_t Sweep(int64_t now) {
    size_t dropped = 0;
    for (size_t i = 0; i < count_; ++i) {
      base::AdaptiveMutexLock lock(shards_[i].mu);
      dropped += shards_[i].table.Sweep(now);
    }
    return dropped;
  }

 private:
  const size_t count_;
  const std::unique_ptr<Shard[]> shards_;
};

}  // namespace sluice::base
