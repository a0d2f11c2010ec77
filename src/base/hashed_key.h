// The form a key too long to store takes: "sha256:" and its SHA-256 in hex (71 bytes). The
// middleware and the rate limit service both store a long key so; a key that starts with the
// prefix is hashed too, so that no key can pose as another's hash. Pure functions (libcrypto);
// thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::base {

inline constexpr std::string_view kHashedKeyPrefix = "sha256:";

// "sha256:" and the SHA-256 of `key` in hex; nullopt if libcrypto fails.
std::optional<std::string> HashedKey(std::string_view key);

// `key` itself when it is at most `max_bytes` long and does not start with kHashedKeyPrefix, else
// HashedKey(key); nullopt if libcrypto fails.
std::optional<std::string> StoredKey(std::string key, size_t max_bytes);

}  // namespace sluice::base
