#include "cli/signals.h"

#include <pthread.h>

#include <initializer_list>

namespace sluice::cli {

ServiceSignals::ServiceSignals() {
  sigemptyset(&signals_);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals_, signal);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

ServiceSignal ServiceSignals::Next() {
  int signal = 0;
  // sigwait fails only for a bad set; the service cannot wait for signals then.
  if (sigwait(&signals_, &signal) != 0) return ServiceSignal::kStop;
  // A blocked signal is pending at most once, however often it was sent; sigwait takes the
  // lowest first, so a stop may still be pending behind a SIGHUP.
  sigset_t pending;
  sigpending(&pending);
  const bool stop =
      signal != SIGHUP || sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
  return stop ? ServiceSignal::kStop : ServiceSignal::kReload;
}

}  // namespace sluice::cli
