// The signals that steer `sluice serve`: SIGTERM and SIGINT stop it, SIGHUP reloads it. They are
// blocked in every thread and taken by ServiceSignals::Next on the thread that asks, so a signal
// never interrupts a thread in the middle of its work and the process never dies of one.
//
// Thread safety: construct on the main thread before any other thread starts (threads inherit
// the blocked set); call Next from one thread.
#pragma once

#include <csignal>

namespace sluice::cli {

enum class ServiceSignal {
  kStop,    // SIGTERM or SIGINT
  kReload,  // SIGHUP
};

class ServiceSignals {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP for the rest of the process's life: a signal that comes
  // before Next, even before the service is up, waits for it.
  ServiceSignals();

  // Waits for the next signal. Signals that are pending together are answered as one: a stop
  // wins over a reload, and any number of SIGHUPs pending (say, while a reload runs) are one
  // reload.
  ServiceSignal Next();

 private:
  sigset_t signals_;
};

}  // namespace sluice::cli
