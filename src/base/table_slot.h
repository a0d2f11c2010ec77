// TableSlot: one entry of a SweptTable in kSlotBytes (64: one cache line), and PlainValueTraits,
// the traits of a value the table may copy byte for byte. A slot holds, in this order: its probe
// distance (1 byte, 0 for an empty slot), 8 bits of the key's hash (a fingerprint: a mismatch is
// rejected without reading the key), the key's size (or kOutOfLine), a flags byte (the value's
// `kind`, 4 bits the owner gives meaning to, and the round of the eviction hand the entry was last
// looked up in), the key (inline up to kKeyBytes, else its size and a pointer to a malloc'd copy),
// the expiry, then the value.
//
// Value requirements: sizeof a multiple of 8, alignment at most 8.
//
// Thread safety: none; a slot belongs to its table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

namespace sluice::base {

// Traits of a value that owns no memory and may be copied byte for byte.
template <class Value>
struct PlainValueTraits {
  static_assert(std::is_trivially_copyable_v<Value>);
  static void Relocate(uint8_t /*kind*/, Value& from, Value* to) noexcept {
    std::memcpy(static_cast<void*>(to), &from, sizeof(Value));
  }
  static void Destroy(uint8_t /*kind*/, Value& /*value*/) noexcept {}
  static size_t HeapBytes(uint8_t /*kind*/, const Value& /*value*/) noexcept { return 0; }
};

template <class Value, size_t kSlotBytes>
struct alignas(64) TableSlot {
  static_assert(sizeof(Value) % 8 == 0 && alignof(Value) <= 8);
  static constexpr size_t kKeyBytes = kSlotBytes - 12 - sizeof(Value);
  static_assert(kKeyBytes >= 12 && kKeyBytes < 255, "room for a key's size and pointer");
  static constexpr uint8_t kOutOfLine = 0xff;
  // The flags byte: the value's kind in the low 4 bits, the eviction hand's round in which the
  // entry was last looked up (modulo 16) in the high 4.
  static constexpr uint8_t kKinds = 16;

  uint8_t probe;              // 0: empty; otherwise 1 + the distance from the key's home slot
  uint8_t fingerprint;        // the hash's top 8 bits
  uint8_t key_size;           // the inline key's size, or kOutOfLine
  uint8_t flags;              // kind | seen << 4
  char key_bytes[kKeyBytes];  // out of line: a uint32_t size, then a char* to the bytes
  int64_t expires_at;         // from then on the entry may be dropped
  alignas(Value) unsigned char value_bytes[sizeof(Value)];

  uint8_t kind() const { return flags & (kKinds - 1); }
  void set_kind(uint8_t kind) { flags = static_cast<uint8_t>((flags & ~(kKinds - 1)) | kind); }
  uint8_t seen() const { return flags >> 4; }
  void set_seen(uint8_t round) { flags = static_cast<uint8_t>(kind() | (round & 15) << 4); }
  Value& value() { return *std::launder(reinterpret_cast<Value*>(value_bytes)); }
  const Value& value() const { return *std::launder(reinterpret_cast<const Value*>(value_bytes)); }

  std::string_view key() const {
    if (key_size != kOutOfLine) return {key_bytes, key_size};
    uint32_t size;
    const char* data;
    std::memcpy(&size, key_bytes, sizeof size);
    std::memcpy(&data, key_bytes + sizeof size, sizeof data);
    return {data, size};
  }
};

}  // namespace sluice::base
