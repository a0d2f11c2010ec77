#include "memory/slot_memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace sluice::memory {

void* MapSlots(size_t mapped_bytes) {
  if (mapped_bytes < kHugeFromBytes) {
    void* data =
        mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return data == MAP_FAILED ? nullptr : data;
  }
  // Over-map by one huge page, then give back the head and tail around the aligned part.
  const size_t span = mapped_bytes + kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + mapped_bytes) {
    munmap(reinterpret_cast<void*>(aligned + mapped_bytes), end - (aligned + mapped_bytes));
  }
  void* data = reinterpret_cast<void*>(aligned);
  // Advice only: without transparent huge pages the table works the same, with more TLB misses.
  madvise(data, mapped_bytes, MADV_HUGEPAGE);
  return data;
}

void UnmapSlots(void* data, size_t mapped_bytes) {
  if (data != nullptr) munmap(data, mapped_bytes);
}

}  // namespace sluice::memory
