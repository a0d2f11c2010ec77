// Redis Cluster key slots: CRC16 (XMODEM) of the key's hash tag, modulo 16384. The hash tag is
// what lies between the first '{' and the first '}' after it, when that is not empty; otherwise
// the whole key is hashed. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::redis {

inline constexpr int kClusterSlots = 16384;

uint16_t KeySlot(std::string_view key);

}  // namespace sluice::redis
