// A (scope, key) pair as one map key, for the in-process tables keyed by both (base::SweptTable:
// MemoryStore's state and ResilientStore's hot-key cache). The lookup on every decision allocates
// nothing: a ScopedKey is hashed from the two parts, and the hash both picks a shard and probes
// the shard's table, which stores the composite form: the scope's length (one byte: at most
// kMaxScopedKeyScopeBytes, 255), the scope, then the key, so that no two pairs collide.
//
// The hash is keyed with a random seed drawn once per process, so that no one outside can
// compute which keys share a slot of a table and send many of them to lengthen its probes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>

namespace sluice::base {

// The longest scope a ScopedKey takes: its length is written in one byte.
inline constexpr size_t kMaxScopedKeyScopeBytes = 255;

namespace hash_detail {

// The wyhash construction (public domain): 64x64->128-bit products, folded.
inline constexpr uint64_t kSecret0 = 0xa0761d6478bd642full;
inline constexpr uint64_t kSecret1 = 0xe7037ed1a0b428dbull;

inline uint64_t Mix(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

inline uint64_t Read8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint64_t Read4(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// memcmp(a, b, n) == 0 for the few bytes of a key, without a library call.
inline bool BytesEqual(const char* a, const char* b, size_t n) {
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (Read8(a + i) != Read8(b + i)) return false;
    }
    return Read8(a + n - 8) == Read8(b + n - 8);
  }
  if (n >= 4) return Read4(a) == Read4(b) && Read4(a + n - 4) == Read4(b + n - 4);
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

inline uint64_t Seed() {
  static const uint64_t seed = [] {
    std::random_device random;
    const uint64_t drawn = (static_cast<uint64_t>(random()) << 32) ^ random();
    return Mix(drawn ^ kSecret0, kSecret1);
  }();
  return seed;
}

}  // namespace hash_detail

// A 64-bit hash of `bytes`, keyed by `seed`.
inline uint64_t HashBytes(std::string_view bytes, uint64_t seed) {
  using namespace hash_detail;
  const char* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t a = 0, b = 0;
  if (n <= 16) {
    if (n >= 4) {
      const size_t quarter = (n >> 3) << 2;  // 0 or 4: two overlapping reads cover 4..16 bytes
      a = (Read4(p) << 32) | Read4(p + quarter);
      b = (Read4(p + n - 4) << 32) | Read4(p + n - 4 - quarter);
    } else if (n > 0) {
      a = (static_cast<uint64_t>(static_cast<uint8_t>(p[0])) << 16) |
          (static_cast<uint64_t>(static_cast<uint8_t>(p[n >> 1])) << 8) |
          static_cast<uint8_t>(p[n - 1]);
    }
  } else {
    size_t left = n;
    while (left > 16) {
      seed = Mix(Read8(p) ^ kSecret1, Read8(p + 8) ^ seed);
      p += 16;
      left -= 16;
    }
    a = Read8(p + left - 16);
    b = Read8(p + left - 8);
  }
  const unsigned __int128 product = static_cast<unsigned __int128>(a ^ kSecret1) * (b ^ seed);
  return Mix(static_cast<uint64_t>(product) ^ kSecret0 ^ n,
             static_cast<uint64_t>(product >> 64) ^ kSecret1);
}

// The hash of a (scope, key) pair, keyed by the process's seed: the key's, seeded by the scope's.
inline uint64_t HashPair(std::string_view scope, std::string_view key) {
  return HashBytes(key, HashBytes(scope, hash_detail::Seed()));
}

// The pair's hash from its composite form (ScopedKey::WriteComposite's bytes).
inline uint64_t HashComposite(std::string_view composite) {
  const size_t scope_size = static_cast<uint8_t>(composite[0]);
  return HashPair(composite.substr(1, scope_size), composite.substr(1 + scope_size));
}

// A (scope, key) pair with its hash, as the in-process tables take it: looking it up composes
// and copies nothing. A table stores the pair's composite form, whose HashComposite is `hash`.
struct ScopedKey {
  std::string_view scope;
  std::string_view key;
  size_t hash;

  ScopedKey(std::string_view s, std::string_view k) : scope(s), key(k), hash(HashPair(s, k)) {}

  size_t composite_size() const { return 1 + scope.size() + key.size(); }
  void WriteComposite(char* to) const {
    to[0] = static_cast<char>(scope.size());
    std::memcpy(to + 1, scope.data(), scope.size());
    std::memcpy(to + 1 + scope.size(), key.data(), key.size());
  }
  bool Matches(std::string_view composite) const {
    return composite.size() == composite_size() &&
           static_cast<uint8_t>(composite[0]) == scope.size() &&
           hash_detail::BytesEqual(composite.data() + 1, scope.data(), scope.size()) &&
           hash_detail::BytesEqual(composite.data() + 1 + scope.size(), key.data(), key.size());
  }
};

// The shard of `shards` (a power of two) a hash picks: bits that a table's slot index (the low 32)
// and fingerprint (the top 8) do not use.
inline size_t ShardIndex(size_t hash, size_t shards) { return (hash >> 32) & (shards - 1); }
}  // namespace sluice::base
