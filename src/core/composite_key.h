// A (scope, key) pair as one map key, for the in-process maps keyed by both: MemoryStore's state
// and ResilientStore's hot-key cache. The lookup on every decision allocates nothing: the
// composite is built in a per-thread buffer and hashed once, and the hash both picks a shard and
// probes the shard's map (KeyHash and KeyEqual take a HashedKey in place of a std::string).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sluice::core {

// scope and key in one string, the scope's length first so no two pairs collide. Valid until the
// next call on the same thread.
inline std::string_view ComposeKey(std::string_view scope, std::string_view key) {
  thread_local std::string composite;
  composite.clear();
  composite.push_back(static_cast<char>(scope.size() >> 8));
  composite.push_back(static_cast<char>(scope.size() & 0xff));
  composite.append(scope);
  composite.append(key);
  return composite;
}

// A key with its hash computed once.
struct HashedKey {
  std::string_view key;
  size_t hash;
};

inline HashedKey Hashed(std::string_view key) { return {key, std::hash<std::string_view>{}(key)}; }

// The shard of `shards` (a power of two) a hash picks: bits the map's own probing uses least.
inline size_t ShardIndex(size_t hash, size_t shards) { return (hash >> 32) & (shards - 1); }

struct KeyHash {
  using is_transparent = void;
  size_t operator()(const std::string& s) const noexcept { return Hashed(s).hash; }
  size_t operator()(const HashedKey& k) const noexcept { return k.hash; }
};

struct KeyEqual {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const noexcept { return a == b; }
  bool operator()(const HashedKey& a, const std::string& b) const noexcept { return a.key == b; }
  bool operator()(const std::string& a, const HashedKey& b) const noexcept { return a == b.key; }
};

}  // namespace sluice::core
