// The memory a table's slots live in, and what the allocator really takes for a block: the two
// figures a table counts against its byte budget.
//
// Slot arrays are anonymous mappings, zero-filled (a zero slot is an empty one) and returned to
// the system when freed. From 1 MiB on, a mapping takes whole huge pages (2 MiB, aligned), advised
// to be backed as such: a probe at a random slot then costs a cache miss, not also a TLB miss.
//
// Thread safety: the functions may be called from any thread.
#pragma once

#include <algorithm>
#include <cstddef>

namespace sluice::base {

inline constexpr size_t kPageBytes = 4096;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// From this size on a slot array is rounded up to huge pages; below, to pages.
inline constexpr size_t kHugeFromBytes = kHugePageBytes / 2;

// What a slot array of at least `bytes` maps.
constexpr size_t MappedBytes(size_t bytes) {
  const size_t unit = bytes >= kHugeFromBytes ? kHugePageBytes : kPageBytes;
  return (bytes + unit - 1) / unit * unit;
}

// The largest mapping that fits in `room` bytes; 0 if not even a page does.
constexpr size_t LargestMappingWithin(size_t room) {
  const size_t unit = room >= kHugePageBytes ? kHugePageBytes : kPageBytes;
  const size_t mapped = room / unit * unit;
  // Pages up to just below kHugeFromBytes, not a size MappedBytes would round up past `room`.
  return MappedBytes(mapped) <= room ? mapped : std::min(mapped, kHugeFromBytes - kPageBytes);
}

// Zeroed memory of `mapped_bytes` (a MappedBytes value), aligned to its unit; null if the system
// refuses.
void* MapSlots(size_t mapped_bytes);
void UnmapSlots(void* data, size_t mapped_bytes);

// What malloc really takes for `n` bytes (glibc: the block and an 8-byte header, rounded up to 16,
// at least 32); 0 for none.
constexpr size_t ChunkBytes(size_t n) {
  return n == 0 ? 0 : std::max<size_t>(32, (n + 8 + 15) / 16 * 16);
}

}  // namespace sluice::base
