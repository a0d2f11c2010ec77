// The hot-key cache's storage: what the cache remembers of a denial (HotKeyEntry) for each
// (scope, key) pair. It is the table MemoryStore keeps its states in (base::ShardedTable of
// base::SweptTable, a lock per shard), with a slot of 128 bytes to hold an entry, so that both
// maps are one implementation with one set of bounds: at most `capacity` keys and
// capacity × kBytesPerKey bytes, split evenly over the shards. A new key in a full shard first
// drops the entries that expired, then evicts those not looked up lately (SweptTable's hand);
// losing one only costs its key a round trip to the backend.
//
// Thread safety: fully thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "base/sharded_table.h"
#include "base/swept_table.h"
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
  static constexpr size_t kShards = 16;
  // A slot (128 bytes) at the table's highest load (4/5), twice over: the array doubles.
  static constexpr size_t kBytesPerKey = 320;

  // At most `capacity` keys in all, spread over the shards (at least one per shard).
  explicit HotKeyMap(size_t capacity);

  // The pair's entry while it lives: until it expires at `now`, and as long as it was made under
  // `limit` (the rule has not changed since). An entry found dead is dropped.
  std::optional<HotKeyEntry> Find(std::string_view scope, std::string_view key, Time now,
                                  const Limit& limit);
  // Sets the pair's entry; a new pair makes room as the class comment says.
  void Put(std::string_view scope, std::string_view key, const HotKeyEntry& entry, Time now);
  void Erase(std::string_view scope, std::string_view key);

  // Entries held, and those evicted before they expired.
  size_t size() const { return shards_.stats().entries; }
  uint64_t evicted() const { return shards_.stats().evicted_lru; }

 private:
  using Table = base::SweptTable<HotKeyEntry, base::PlainValueTraits<HotKeyEntry>, 128>;

  base::ShardedTable<Table> shards_;
};

}  // namespace sluice::resilience
