// The faults of a Redis that the fault tests inject, shared by the library's
// (tests/redis/fault_test.cc) and `sluice serve`'s (tests/http/serve_fault_test.cc), so both prove
// the same five: the server killed, hung, slowed, its scripts flushed and its clients killed, and
// full. A FaultInjector wraps one RedisServer: the client under test connects to its port() (a
// DelayProxy's for kSlowed), and Inject() and Clear() start and end the fault.
//
// Not thread-safe; one owner (the test's main thread).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>

#include "support/delay_proxy.h"
#include "support/redis_server.h"

namespace sluice::testing {

enum class RedisFault {
  kKilled,          // kill -9; restarted on the same port when cleared
  kHung,            // SIGSTOP; SIGCONT when cleared
  kSlowed,          // a DelayProxy adds 100 ms each way; back to 0 when cleared
  kScriptsFlushed,  // SCRIPT FLUSH five times, 100 ms apart; nothing to clear
  kClientsKilled,   // CLIENT KILL TYPE normal; nothing to clear (the clients reconnect)
  kFull,            // maxclients lowered to 1 (held by the injector) and the clients killed, so
                    // their reconnections are refused; maxclients restored when cleared
};

// "Killed", "Hung", ... (valid in a gtest name).
const char* RedisFaultName(RedisFault fault);
// For gtest's messages.
inline void PrintTo(RedisFault fault, std::ostream* os) { *os << RedisFaultName(fault); }

// Whether the failure policy must decide while the fault lasts. Not for kScriptsFlushed (NOSCRIPT
// is handled inside the client, so the policy must never decide) nor kClientsKilled (the clients
// reconnect at once: only the calls in flight on a killed connection fail, maybe none).
bool PolicyMustDecide(RedisFault fault);

class FaultInjector {
 public:
  // Null, after printing why, if what the fault needs (its proxy, its connection) cannot be set
  // up. Create it before the client under test connects: kFull holds a connection of its own.
  static std::unique_ptr<FaultInjector> Create(RedisServer& server, RedisFault fault);
  ~FaultInjector();

  RedisFault fault() const { return fault_; }
  // Where the client under test connects.
  int port() const;
  // Each returns false, after printing why, if Redis did not do what was asked.
  bool Inject();
  bool Clear();

  // For kClientsKilled and kFull: how many clients CLIENT KILL reported killed.
  int64_t killed() const { return killed_; }
  // The ids of the normal clients connected now, but for redis-cli's and the injector's own.
  std::set<int64_t> ClientIds() const;

 private:
  FaultInjector(RedisServer& server, RedisFault fault) : server_(server), fault_(fault) {}
  // A command on the injector's own connection (kFull), inline form; its reply's first line.
  std::string Command(const std::string& inline_command) const;

  RedisServer& server_;
  const RedisFault fault_;
  std::unique_ptr<DelayProxy> proxy_;  // kSlowed
  int connection_ = -1;                // kFull
  int64_t connection_id_ = -1;
  std::string maxclients_;  // kFull: the value to restore
  int64_t killed_ = 0;
};

// The resident set of process `pid` (VmRSS in /proc/<pid>/status), in bytes; 0 if unreadable.
size_t ResidentBytes(pid_t pid);

// The share of the last 10 s in which some runnable thread of this machine waited for a CPU
// (/proc/pressure/cpu, "some avg10"), in percent; -1 if unknown. Printed with the fault tests'
// timings: a stall of the whole machine shows there, not in sluice.
double CpuPressure();

// The peak of ResidentBytes(pid), sampled every 10 ms on a thread of its own while it lives, so
// that memory held only during a fault is seen too.
class ResidentPeak {
 public:
  explicit ResidentPeak(pid_t pid);
  ~ResidentPeak();
  ResidentPeak(const ResidentPeak&) = delete;
  ResidentPeak& operator=(const ResidentPeak&) = delete;

  // Forgets the peak so far and returns the resident set now: the baseline of what follows.
  size_t Restart();
  size_t peak() const { return peak_.load(); }

 private:
  const pid_t pid_;
  std::atomic<size_t> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread sampler_;
};

}  // namespace sluice::testing
