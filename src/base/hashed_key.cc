#include "base/hashed_key.h"

#include <openssl/evp.h>

namespace sluice::base {

std::optional<std::string> HashedKey(std::string_view key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(key.data(), key.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    return std::nullopt;
  }
  constexpr char kHex[] = "0123456789abcdef";
  std::string hashed(kHashedKeyPrefix);
  for (unsigned int i = 0; i < size; ++i) {
    hashed += kHex[digest[i] >> 4];
    hashed += kHex[digest[i] & 0xf];
  }
  return hashed;
}

std::optional<std::string> StoredKey(std::string key, size_t max_bytes) {
  if (key.size() > max_bytes || key.starts_with(kHashedKeyPrefix)) return HashedKey(key);
  return key;
}

}  // namespace sluice::base
