// `sluice bench --rate N`: one thread starts the checks on their schedule, whatever the answers,
// and the store's callbacks count them (inline ones, such as a memory store's or a lease's, on
// the pacing thread).
#include <condition_variable>
#include <thread>

#include "base/mutex.h"
#include "cli/bench_load.h"

namespace sluice::cli {

uint64_t RunOpenLoop(Limiter& limiter, const BenchFlags& flags, Steady::time_point start,
                     Steady::time_point end, Tally& tally) {
  struct InFlight {
    base::Mutex mu;
    std::condition_variable changed;
    int count SLUICE_GUARDED_BY(mu) = 0;
  } in_flight;
  KeyPicker keys(flags, 0);
  const std::chrono::duration<double> interval(1.0 / flags.rate);
  uint64_t late = 0;
  for (uint64_t i = 0;; ++i) {
    const auto due =
        start + std::chrono::duration_cast<Steady::duration>(interval * static_cast<double>(i));
    if (due >= end) break;
    std::this_thread::sleep_until(due);  // at once when behind: the missed checks catch up
    {
      base::MutexLock lock(in_flight.mu);
      if (in_flight.count >= flags.concurrency) {
        ++late;
        while (in_flight.count >= flags.concurrency) lock.Wait(in_flight.changed);
      }
      ++in_flight.count;
    }
    if (Steady::now() >= end) {  // waited for a slot past the end: this check is not started
      base::MutexLock lock(in_flight.mu);
      --in_flight.count;
      break;
    }
    limiter.CheckAsync(keys.Next(), 1, [&tally, &in_flight, due](Result<Decision> d) {
      tally.Add(d, due);
      base::MutexLock lock(in_flight.mu);
      --in_flight.count;
      in_flight.changed.notify_one();
    });
  }
  base::MutexLock lock(in_flight.mu);
  while (in_flight.count != 0) lock.Wait(in_flight.changed);
  return late;
}

}  // namespace sluice::cli
