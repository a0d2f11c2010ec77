// Counts the test binary's allocations: the global operator new is replaced in
// allocation_counter.cc (a file of its own, so no caller inlines the replacement).
#pragma once

#include <cstdint>

namespace sluice::rls::test {

// Calls of operator new so far, from every thread.
int64_t AllocationCount();

}  // namespace sluice::rls::test
