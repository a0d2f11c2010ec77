#include "base/slot_memory.h"

#include <sys/mman.h>

#include <cstdint>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define SLUICE_LEAK_CHECKED 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define SLUICE_LEAK_CHECKED 1
#endif
#ifdef SLUICE_LEAK_CHECKED
#include <sanitizer/lsan_interface.h>
#endif

namespace sluice::base {
namespace {

// The slots hold the only pointers to keys copied out of line with malloc. LeakSanitizer scans
// malloc'd memory and globals, not mappings: told of the mapping, it finds those keys reachable.
void* Scanned(void* data, size_t mapped_bytes) {
#ifdef SLUICE_LEAK_CHECKED
  if (data != nullptr) __lsan_register_root_region(data, mapped_bytes);
#else
  (void)mapped_bytes;
#endif
  return data;
}

}  // namespace

void* MapSlots(size_t mapped_bytes) {
  if (mapped_bytes < kHugeFromBytes) {
    void* data =
        mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return data == MAP_FAILED ? nullptr : Scanned(data, mapped_bytes);
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
  return Scanned(data, mapped_bytes);
}

void UnmapSlots(void* data, size_t mapped_bytes) {
  if (data == nullptr) return;
#ifdef SLUICE_LEAK_CHECKED
  __lsan_unregister_root_region(data, mapped_bytes);
#endif
  munmap(data, mapped_bytes);
}

}  // namespace sluice::base
