// The hot-key cache's storage: what the cache remembers of a denial (HotKeyEntry) for each
// (scope, key) pair, in a map bounded in size and sharded by the pair's hash, a lock per shard.
// The bound holds per shard: a full shard makes room by dropping the entries that expired, at
// most once every 10 ms (sooner, a sweep would find too little to be worth its O(n)), and
// otherwise takes no new key. The map is kept behind this class, apart from the cache's rules,
// so that another sharded map (MemoryStore's) can take its place.
//
// Thread safety: fully thread-safe.
#pragma once

#include <boost/unordered/unordered_flat_map.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/composite_key.h"
#include "core/mutex.h"
#include "sluice/clock.h"
#include "sluice/limit.h"

namespace sluice::resilience {

// A denial by the backend, and what it told of the key.
struct HotKeyEntry {
  Limit limit;  // the one the denial was made under
  int64_t cost = 0;
  Time denied_until;  // when the request denied would pass; the entry expires then
  Time fresh_at;
  // What the denial said remained, and when more would: other traffic can only lower it, so it
  // stays an upper bound while the entry lives.
  int64_t remaining = 0;
  Time replenish_at;
};

class HotKeyMap {
 public:
  // At most `capacity` keys in all, spread over the shards (at least one per shard).
  explicit HotKeyMap(size_t capacity);

  // The pair's entry while it lives: until it expires at `now`, and as long as it was made under
  // `limit` (the rule has not changed since). An entry found dead is dropped.
  std::optional<HotKeyEntry> Find(std::string_view scope, std::string_view key, Time now,
                                  const Limit& limit);
  // Sets the pair's entry; a new pair in a full shard is kept only if a sweep makes room.
  void Put(std::string_view scope, std::string_view key, const HotKeyEntry& entry, Time now);
  void Erase(std::string_view scope, std::string_view key);

 private:
  static constexpr size_t kShards = 16;
  static constexpr Duration kFullSweepInterval = std::chrono::milliseconds(10);

  struct alignas(64) Shard {
    core::Mutex mu;
    boost::unordered_flat_map<std::string, HotKeyEntry, core::KeyHash, core::KeyEqual> map
        GUARDED_BY(mu);
    Time last_sweep GUARDED_BY(mu) = Time() - kFullSweepInterval;

    // Drops what expired, unless the last sweep was too recent; true if that made room.
    bool SweptRoom(Time now, size_t bound) REQUIRES(mu);
  };

  Shard& ShardFor(const core::HashedKey& key) {
    return shards_[core::ShardIndex(key.hash, kShards)];
  }

  const size_t per_shard_;
  Shard shards_[kShards];
};

}  // namespace sluice::resilience
