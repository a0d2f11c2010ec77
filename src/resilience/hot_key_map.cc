#include "resilience/hot_key_map.h"

#include <algorithm>
#include <new>

#include "base/adaptive_mutex.h"
#include "base/scoped_key.h"
#include "base/slot_memory.h"

namespace sluice::resilience {
namespace {

int64_t Ticks(Time t) { return t.time_since_epoch().count(); }

// Each shard needs room for its first array (a page) and the next (two).
constexpr size_t kMinShardBytes = 3 * base::kPageBytes;

}  // namespace

HotKeyMap::HotKeyMap(size_t capacity)
    : shards_(kShards, {.max_bytes = std::max(capacity * kBytesPerKey, kShards * kMinShardBytes),
                        .max_entries = capacity}) {}

std::optional<HotKeyEntry> HotKeyMap::Find(std::string_view scope, std::string_view key, Time now,
                                           const Limit& limit) {
  const base::ScopedKey scoped(scope, key);
  auto& shard = shards_.For(scoped.hash);
  base::AdaptiveMutexLock lock(shard.mu);
  Table::Slot* slot = shard.table.Find(scoped);
  if (slot == nullptr) return std::nullopt;
  if (slot->value().denied_until <= now || slot->value().limit != limit) {
    shard.table.Erase(slot);
    return std::nullopt;
  }
  return slot->value();
}

void HotKeyMap::Put(std::string_view scope, std::string_view key, const HotKeyEntry& entry,
                    Time now) {
  const base::ScopedKey scoped(scope, key);
  auto& shard = shards_.For(scoped.hash);
  base::AdaptiveMutexLock lock(shard.mu);
  Table::Slot* slot = shard.table.Find(scoped);
  if (slot == nullptr) {
    slot = shard.table.Insert(scoped, 0, Ticks(entry.denied_until), 0, Ticks(now), {});
    if (slot == nullptr) return;  // no room: the key is decided by the backend each time
  }
  slot->expires_at = Ticks(entry.denied_until);
  new (&slot->value()) HotKeyEntry(entry);
}

void HotKeyMap::Erase(std::string_view scope, std::string_view key) {
  const base::ScopedKey scoped(scope, key);
  auto& shard = shards_.For(scoped.hash);
  base::AdaptiveMutexLock lock(shard.mu);
  if (Table::Slot* slot = shard.table.Find(scoped)) shard.table.Erase(slot);
}

}  // namespace sluice::resilience
