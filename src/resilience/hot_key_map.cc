#include "resilience/hot_key_map.h"

#include <algorithm>

namespace sluice::resilience {

HotKeyMap::HotKeyMap(size_t capacity) : per_shard_(std::max<size_t>(capacity / kShards, 1)) {}

std::optional<HotKeyEntry> HotKeyMap::Find(std::string_view scope, std::string_view key, Time now,
                                           const Limit& limit) {
  const core::HashedKey composite = core::Hashed(core::ComposeKey(scope, key));
  Shard& shard = ShardFor(composite);
  core::MutexLock lock(shard.mu);
  auto it = shard.map.find(composite);
  if (it == shard.map.end()) return std::nullopt;
  if (it->second.denied_until <= now || it->second.limit != limit) {
    shard.map.erase(it);
    return std::nullopt;
  }
  return it->second;
}

void HotKeyMap::Put(std::string_view scope, std::string_view key, const HotKeyEntry& entry,
                    Time now) {
  const core::HashedKey composite = core::Hashed(core::ComposeKey(scope, key));
  Shard& shard = ShardFor(composite);
  core::MutexLock lock(shard.mu);
  if (auto it = shard.map.find(composite); it != shard.map.end()) {
    it->second = entry;
    return;
  }
  if (shard.map.size() >= per_shard_ && !shard.SweptRoom(now, per_shard_)) return;
  shard.map.emplace(std::string(composite.key), entry);
}

void HotKeyMap::Erase(std::string_view scope, std::string_view key) {
  const core::HashedKey composite = core::Hashed(core::ComposeKey(scope, key));
  Shard& shard = ShardFor(composite);
  core::MutexLock lock(shard.mu);
  if (auto it = shard.map.find(composite); it != shard.map.end()) shard.map.erase(it);
}

bool HotKeyMap::Shard::SweptRoom(Time now, size_t bound) {
  if (now - last_sweep < kFullSweepInterval) return false;
  last_sweep = now;
  boost::unordered::erase_if(map, [now](const auto& kv) { return kv.second.denied_until <= now; });
  return map.size() < bound;
}

}  // namespace sluice::resilience
