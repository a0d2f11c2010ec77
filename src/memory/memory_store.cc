#include "sluice/memory_store.h"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "base/adaptive_mutex.h"
#include "base/scoped_key.h"
#include "base/sharded_table.h"
#include "base/swept_table.h"
#include "core/algorithms.h"
#include "memory/stored_state.h"

namespace sluice {
namespace {

using base::ScopedKey;
using memory::StoredState;
using Traits = memory::StoredStateTraits;
using Table = base::SweptTable<StoredState, Traits>;

constexpr size_t kMinMaxMemory = size_t{64} << 10;
constexpr size_t kMinShardBytes = size_t{1} << 20;

int64_t Ticks(Time t) { return t.time_since_epoch().count(); }

size_t ShardCount(const MemoryStoreOptions& options) {
  size_t shards = std::bit_ceil(std::max<size_t>(options.shards, 1));
  while (shards > 1 && options.max_memory / shards < kMinShardBytes) shards /= 2;
  return shards;
}

// Decides on a key's state in its slot, and keeps the table's count of the state's heap and the
// key's expiry (or the key itself) in step.
Decision DecideHeld(Table& table, Table::Slot& slot, const ScopedKey& key, const Limit& limit,
                    int64_t now, int64_t cost, int64_t max_delay) {
  uint8_t kind = slot.kind();
  const size_t heap_before = Traits::HeapBytes(kind, slot.value());
  const Decision decision = memory::DecideStored(limit, kind, slot.value(), now, cost, max_delay);
  slot.set_kind(kind);
  const size_t heap_after = Traits::HeapBytes(kind, slot.value());
  // Only when it changed: the table's counters share a cache line that threads on other keys of
  // the shard read.
  if (heap_after != heap_before) {
    table.AddHeapBytes(static_cast<ptrdiff_t>(heap_after - heap_before));
  }
  if (decision.reset_after.count() == 0) {
    table.Erase(&slot);
    return decision;
  }
  slot.expires_at = now + decision.reset_after.count();
  if (heap_after > heap_before) table.Fit(now, {&key, 1});
  return decision;
}

}  // namespace

struct MemoryStore::Tables : base::ShardedTable<Table> {
  using ShardedTable::ShardedTable;
};

MemoryStore::MemoryStore(MemoryStoreOptions options)
    : clock_(options.clock ? *options.clock : SystemClock::Instance()),
      max_memory_(std::max(options.max_memory, kMinMaxMemory)) {
  options.max_memory = max_memory_;
  tables_ = std::make_unique<Tables>(
      ShardCount(options),
      Table::Limits{.max_bytes = max_memory_, .max_entries = options.max_keys});
}

MemoryStore::~MemoryStore() = default;

Result<Decision> MemoryStore::Decide(const CheckRequest& request) {
  const Limit& limit = *request.limit;
  const ScopedKey key(request.scope, request.key);
  Tables::Shard& shard = tables_->For(key.hash);
  Tables::Prefetch(shard, key.hash);
  const int64_t now = Ticks(clock_.now());

  base::AdaptiveMutexLock lock(shard.mu);
  Table& table = shard.table;
  if (Table::Slot* slot = table.Find(key)) {
    return DecideHeld(table, *slot, key, limit, now, request.cost, request.max_delay.count());
  }
  core::State fresh = core::FreshState(limit, now);
  const Decision decision =
      core::Decide(limit, fresh, now, request.cost, request.max_delay.count());
  const int64_t reset_after = decision.reset_after.count();
  if (reset_after == 0) return decision;  // nothing consumed: keep nothing
  Table::Slot* slot = table.Insert(key, memory::KindOf(limit.algorithm()), now + reset_after,
                                   memory::HeapBytes(fresh), now, {});
  if (slot == nullptr) return Full();
  memory::Construct(std::move(fresh), &slot->value());
  return decision;
}

Status MemoryStore::Full() const {
  return Status::ResourceExhausted("memory store is full: no room for a new key within " +
                                   std::to_string(max_memory_) + " bytes");
}

// The analysis cannot follow a set of locks taken in a loop: every shard in `shards` is locked
// from the first loop to the scope's end.
Result<std::vector<Decision>> MemoryStore::DecideAll(std::span<const CheckRequest> requests)
    SLUICE_NO_THREAD_SAFETY_ANALYSIS {
  struct Item {
    Tables::Shard* shard;
    core::State state;  // a copy, decided on
    bool held;          // the key has a state in its shard
  };
  const int64_t now = Ticks(clock_.now());
  std::vector<ScopedKey> keys;  // also what no insert of the call may evict
  keys.reserve(requests.size());
  std::vector<Item> items;
  items.reserve(requests.size());
  std::vector<Tables::Shard*> shards;
  for (const CheckRequest& r : requests) {
    const ScopedKey& key = keys.emplace_back(r.scope, r.key);
    Tables::Shard* shard = &tables_->For(key.hash);
    items.push_back({shard, {}, false});
    shards.push_back(shard);
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  for (Tables::Shard* shard : shards) shard->mu.Lock();
  struct Unlock {
    std::vector<Tables::Shard*>& shards;
    ~Unlock() SLUICE_NO_THREAD_SAFETY_ANALYSIS {
      for (Tables::Shard* shard : shards) shard->mu.Unlock();
    }
  } unlock{shards};

  const auto find = [&](size_t i) SLUICE_NO_THREAD_SAFETY_ANALYSIS {
    return items[i].shard->table.Find(keys[i]);
  };
  const auto state_or_fresh = [now](const Table::Slot* slot, const Limit& limit) {
    return slot ? memory::Load(slot->kind(), slot->value()) : core::FreshState(limit, now);
  };
  std::vector<Decision> decisions;
  decisions.reserve(requests.size());
  bool all_allowed = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    const CheckRequest& r = requests[i];
    Item& item = items[i];
    const Table::Slot* slot = find(i);
    item.held = slot != nullptr;
    item.state = state_or_fresh(slot, *r.limit);
    decisions.push_back(core::Decide(*r.limit, item.state, now, r.cost));
    all_allowed = all_allowed && decisions.back().allowed;
  }
  if (!all_allowed) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!decisions[i].allowed) continue;
      // A denied Decide writes nothing, so this sees the state as it was.
      core::State state = state_or_fresh(find(i), *requests[i].limit);
      decisions[i] = core::Decide(*requests[i].limit, state, now, 0);
      decisions[i].allowed = false;
      decisions[i].retry_after = Duration(0);
    }
    return decisions;
  }
  // Room for every new key in each shard before anything is written.
  for (Tables::Shard* shard : shards) {
    size_t entries = 0, heap = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].shard != shard || items[i].held || decisions[i].reset_after.count() == 0) {
        continue;
      }
      ++entries;
      heap += Table::KeyHeapBytes(keys[i].composite_size()) + memory::HeapBytes(items[i].state);
    }
    if (entries > 0 && !shard->table.Reserve(entries, heap, now, keys)) return Full();
  }
  // The new keys first: if one cannot be inserted after all, those inserted are taken back and
  // nothing was written.
  std::vector<size_t> inserted;
  for (size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    const int64_t reset_after = decisions[i].reset_after.count();
    if (item.held || reset_after == 0) continue;
    Table& table = item.shard->table;
    Table::Slot* slot = table.Insert(keys[i], memory::KindOf(requests[i].limit->algorithm()),
                                     now + reset_after, memory::HeapBytes(item.state), now, keys);
    if (slot == nullptr) {
      for (size_t j : inserted) items[j].shard->table.Erase(find(j));
      return Full();
    }
    memory::Construct(std::move(item.state), &slot->value());
    inserted.push_back(i);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    if (!item.held) continue;
    Table& table = item.shard->table;
    Table::Slot* slot = find(i);
    const int64_t reset_after = decisions[i].reset_after.count();
    if (reset_after == 0) {
      table.Erase(slot);
      continue;
    }
    const size_t heap_before = Traits::HeapBytes(slot->kind(), slot->value());
    Traits::Destroy(slot->kind(), slot->value());
    const size_t heap_after = memory::HeapBytes(item.state);
    slot->set_kind(memory::Construct(std::move(item.state), &slot->value()));
    slot->expires_at = now + reset_after;
    table.AddHeapBytes(static_cast<ptrdiff_t>(heap_after - heap_before));
  }
  for (Tables::Shard* shard : shards) shard->table.Fit(now, keys);
  return decisions;
}

void MemoryStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  done(DecideAll(requests));
}

void MemoryStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  std::vector<Result<Decision>> results;
  results.reserve(requests.size());
  for (const auto& r : requests) results.push_back(Decide(r));
  done(std::move(results));
}

Status MemoryStore::Forget(std::string_view scope, std::string_view key) {
  const ScopedKey scoped(scope, key);
  Tables::Shard& shard = tables_->For(scoped.hash);
  base::AdaptiveMutexLock lock(shard.mu);
  if (Table::Slot* slot = shard.table.Find(scoped)) shard.table.Erase(slot);
  return Status::Ok();
}

void MemoryStore::DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) {
  done(Forget(scope, key));
}

Status MemoryStore::Return(std::string_view scope, const Limit& limit, std::string_view key,
                           int64_t units, Time apply_by) {
  const ScopedKey scoped(scope, key);
  Tables::Shard& shard = tables_->For(scoped.hash);
  const Time at = clock_.now();
  const int64_t now = Ticks(at);
  units = UnitsGivenBack(units, apply_by, at, limit.emission_interval());
  if (units == 0) return Status::Ok();
  base::AdaptiveMutexLock lock(shard.mu);
  Table::Slot* slot = shard.table.Find(scoped);
  // No state, or another algorithm's (or one out of range): nothing of this meter to give back
  // to. A meter's state holds no heap, so the table's bytes do not change.
  if (slot == nullptr || slot->kind() != memory::KindOf(limit.algorithm()) ||
      !memory::InRange(limit, slot->kind(), slot->value(), now)) {
    return Status::Ok();
  }
  const int64_t reset_after = memory::GiveBackStored(limit, slot->value(), now, units);
  if (reset_after == 0) {
    shard.table.Erase(slot);
  } else {
    slot->expires_at = now + reset_after;
  }
  return Status::Ok();
}

void MemoryStore::DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                                  int64_t units, Time apply_by, StatusCallback done) {
  done(Return(scope, limit, key, units, apply_by));
}

size_t MemoryStore::size() const { return tables_->stats().entries; }

size_t MemoryStore::Sweep() { return tables_->Sweep(Ticks(clock_.now())); }

StoreMemoryStats MemoryStore::memory_stats() const {
  const Table::Stats stats = tables_->stats();
  return {.keys = stats.entries,
          .bytes = stats.bytes,
          .max_bytes = max_memory_,
          .evicted_fresh = stats.dropped_fresh,
          .evicted_lru = stats.evicted_lru};
}

}  // namespace sluice
