// Uses the installed headers and library: 3 per second admits exactly 3 of 5.
#include <sluice/limiter.h>
#include <sluice/memory_store.h>

#include <chrono>
#include <cstdio>

int main() {
  sluice::ManualClock clock;
  sluice::MemoryStore store(sluice::MemoryStoreOptions{.clock = &clock});
  auto limit = sluice::Limit::Create(sluice::Algorithm::kGcra, 3, std::chrono::seconds(1));
  if (!limit.ok()) return 1;
  sluice::Limiter limiter(store, "consumer", *limit);
  int allowed = 0;
  for (int i = 0; i < 5; ++i) allowed += limiter.Check("key").value().allowed ? 1 : 0;
  std::printf("allowed %d of 5\n", allowed);
  return allowed == 3 ? 0 : 1;
}
