// MemoryStore: limiter state in this process's memory, for one process (or a local fallback).
// Keys are spread over shards, each with its own lock, so checks on distinct keys scale across
// cores. Memory is bounded: each key's state knows when it becomes equivalent to fresh and is
// then dropped (lazily, in sweeps amortised over inserts). The key bound is enforced per shard
// (max_keys / shards each): when a key's shard is full, a check that would add a new key is
// refused with RESOURCE_EXHAUSTED after a sweep finds nothing to drop, while keys already present
// keep working. Evicting a live key instead would silently reset its limit and admit more than
// the limit.
//
// Thread safety: fully thread-safe; decisions on one key are linearizable.
#pragma once

#include <cstddef>
#include <memory>

#include "sluice/clock.h"
#include "sluice/store.h"

namespace sluice {

struct MemoryStoreOptions {
  // The clock decisions are made with; the system clock when null. Must outlive the store.
  const Clock* clock = nullptr;
  size_t max_keys = 10'000'000;
  // Rounded up to a power of two.
  size_t shards = 64;
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // Keys currently held, including those that expired but were not swept yet.
  size_t size() const;
  // Drops every key whose state is equivalent to fresh; returns how many.
  size_t Sweep();

  bool DecidesInline() const override { return true; }

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override;
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override;
  std::vector<Result<Decision>> DoCheckBatch(std::span<const CheckRequest> requests) override;
  Status DoReset(std::string_view scope, std::string_view key) override;
  Result<Decision> DoCheck(const CheckRequest& request) override;
  void DoCheckAsync(const CheckRequest& request, DecisionCallback done) override;
  // Every key's shard locked at once (in one order, so no two calls wait on each other), each
  // request decided on a copy of its state, and the copies kept only if all admit.
  Result<std::vector<Decision>> DoCheckAll(std::span<const CheckRequest> requests) override;
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override;

 private:
  struct Shard;
  Shard& ShardFor(size_t hash);
  Status Full() const;
  const Clock& clock_;
  size_t max_keys_per_shard_;
  size_t shard_mask_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace sluice
