// MemoryStore: limiter state in this process's memory, for one process (or a local fallback).
// Keys are spread over shards, each with its own lock, so checks on distinct keys scale across
// cores; a shard is a flat table of one 64-byte slot per key (a key of up to 20 bytes, with its
// scope, is held in the slot; longer keys and sliding_log's entries are on the heap).
//
// Memory is bounded by max_memory, which counts what the store really allocates for its keys:
// the tables' slots, out-of-line keys and sliding_log entries (the `bytes` of memory_stats()).
// The bound is split evenly over the shards. Each key's state knows when it becomes equivalent
// to fresh (below the bound a shard's table grows rather than dropping such states, so that a key
// coming back after its state expired finds its slot); a new key that finds its shard at the bound
// first makes room by dropping every such state (which changes no decision), and then, if that is
// not enough, by evicting keys not checked lately: an eviction hand visits each slot of the shard
// once a round and evicts a key not checked in its current round or the previous one (a new key
// counts as not checked, so a key checked once goes before one checked again). A key checked at
// least once a round is never evicted; an evicted key's next check starts from a fresh state, so
// the store can admit up to one more capacity of its limit for it. Existing keys keep being decided
// at the bound, and new ones are admitted. A check is refused with RESOURCE_EXHAUSTED only when no
// room can be made at all (the system refuses memory, or a CheckAll's own keys fill a shard).
// max_keys is a second bound, on the keys held, enforced the same way.
//
// Thread safety: fully thread-safe; decisions on one key are linearizable.
#pragma once

#include <cstddef>
#include <memory>

#include "sluice/clock.h"
#include "sluice/store.h"
#include "sluice/store_memory.h"

namespace sluice {

struct MemoryStoreOptions {
  // The clock decisions are made with; the system clock when null. Must outlive the store.
  const Clock* clock = nullptr;
  // Bytes, at least 64 KiB (a smaller value is raised to it).
  size_t max_memory = size_t{256} << 20;
  size_t max_keys = 10'000'000;
  // Rounded up to a power of two, then halved while a shard would get less than 1 MiB of
  // max_memory.
  size_t shards = 64;
};

class MemoryStore final : public Store, public StoreMemory {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // Keys currently held, including those that expired but were not dropped yet.
  size_t size() const;
  // Drops every key whose state is equivalent to fresh; returns how many.
  size_t Sweep();

  StoreMemoryStats memory_stats() const override;
  bool DecidesInline() const override { return true; }

 protected:
  // Each decided inline, on the calling thread: the callback runs before the call returns.
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override;
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override;
  void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by, StatusCallback done) override;
  // Every key's shard locked at once (in one order, so no two calls wait on each other), each
  // request decided on a copy of its state, and the copies kept only if all admit.
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override;

 private:
  struct Tables;
  Result<Decision> Decide(const CheckRequest& request);
  Result<std::vector<Decision>> DecideAll(std::span<const CheckRequest> requests);
  Status Forget(std::string_view scope, std::string_view key);
  Status Return(std::string_view scope, const Limit& limit, std::string_view key, int64_t units,
                Time apply_by);
  Status Full() const;
  const Clock& clock_;
  size_t max_memory_;
  std::unique_ptr<Tables> tables_;
};

}  // namespace sluice
