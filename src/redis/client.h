// An asynchronous Redis client on Boost.Asio: commands from any thread share a few multiplexed
// connections (auto-pipelining: whatever is queued while a write is in flight goes out in the
// next single write; replies are matched in order). hiredis is used only to format commands
// (redisFormatCommandArgv) and to parse replies (redisReader).
//
// Every call has a deadline (ClientOptions::timeout) enforced by a timer: the callback runs with
// DEADLINE_EXCEEDED when it passes, and a late reply is discarded. There are no automatic
// retries; a connection with max_pending calls outstanding refuses more at once with
// UNAVAILABLE (Redis is not keeping up: an outage, for the caller's failure policy); while a
// connection is down, calls fail fast with UNAVAILABLE too and the client reconnects in the
// background.
//
// Thread safety: all methods may be called from any thread. Callbacks run exactly once and must
// not block: on a client I/O thread, or inline on the calling thread when a call is refused at
// once (not connected, too many pending calls). A Script passed to a call must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "redis/resp.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::redis {

class IoThreads;

struct ClientOptions {
  // TCP
  std::string host = "127.0.0.1";
  int port = 6379;
  // Unix socket: used instead of TCP when not empty.
  std::string unix_path;
  // AUTH (with `user` when not empty: Redis 6 ACL) and SELECT, sent on every (re)connect.
  std::string user;
  std::string password;
  int db = 0;

  Duration timeout = std::chrono::milliseconds(50);
  Duration connect_timeout = std::chrono::milliseconds(50);
  size_t max_pending_per_connection = 4096;
  int io_threads = 1;
  // Two, so that one connection's batch is at Redis while the other's replies are handled: with
  // one, Redis idles during that time (about 10% of throughput at 64 calls in flight).
  int connections_per_thread = 2;
  // Reconnection waits between these, doubling, with jitter (src/redis/backoff.h). The cap
  // bounds how long after Redis returns a connection is back: 250 ms, so that with
  // ResilientStore's breaker service returns within a second.
  Duration reconnect_min = std::chrono::milliseconds(10);
  Duration reconnect_max = std::chrono::milliseconds(250);
  // A connection that has calls waiting and has read nothing for this long is dropped and
  // re-established (a hung server, a dead peer).
  Duration hang_timeout = std::chrono::seconds(1);
  // Checks at most in one coalesced script call (EvalShaCoalesced); 1 sends each in its own call.
  size_t coalesce_max = 64;
};

// How one call is sent; the defaults suit every call but one a Redis Cluster redirected.
struct CallOptions {
  // When set, the call's deadline instead of now + ClientOptions::timeout: a redirected call
  // keeps the deadline of its first attempt.
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt;
  // Writes ASKING immediately before the command on the same connection (an ASK redirection's
  // one-shot permission) and discards ASKING's reply.
  bool asking = false;
  // A script that also reaches keys outside its keys' slot (the flag allow-cross-slot-keys). A
  // Redis Cluster's ASK redirection is then not followed (the call fails with UNAVAILABLE): with
  // ASKING, the node asked would serve the script any key of a slot it is importing, reading one
  // still on the other node as absent.
  bool cross_slot = false;
};

// A check that may share one script call with the checks queued beside it on its connection: a
// part of a call of `many`. Each check has the args of its own call of `single`, one of which,
// `own_arg`, is its own; consecutive checks with the same other args form a run, which has them
// once. So the call's KEYS are its checks' keys, one check after another, and its ARGV:
//   1  the number of runs
//   2  1 when two of its checks may have the same keys, 0 when none do
//   3  1 when the call is across slots (below), 0 when not
//      then per run, in order: the index of its first check (from 0), and the args it shares
//      then each check's own arg, in order
//      then, across slots, the keys of every check but the first, in order.
// Across slots (`across_slots`, a Redis Cluster node's checks, whose keys are in many slots): the
// call declares only its first check's keys, by which Redis Cluster routes it (it refuses a call
// declaring keys of several slots), and the script reaches the others by name, which a script
// without flags may do on the node that holds them. Its reply is one flat array of the elements
// of each check's reply, in order, as many per check. Checks share a call only with checks of the
// same `many` and `across_slots`.
struct CoalescibleCall {
  ScriptCall single;
  const Script* many = nullptr;
  size_t own_arg = 0;  // an index in single.args
  bool across_slots = false;
};

using ReplyCallback = std::function<void(Result<Reply>)>;
using BatchReplyCallback = std::function<void(std::vector<Result<Reply>>)>;

struct ClientStats {
  uint64_t commands = 0;  // commands written
  uint64_t writes = 0;    // socket writes that carried them
  uint64_t connects = 0;  // successful (re)connections

  ClientStats& operator+=(const ClientStats& other) {
    commands += other.commands;
    writes += other.writes;
    connects += other.connects;
    return *this;
  }
};

class Client {
 public:
  // Starts the I/O threads and connects, waiting up to connect_timeout for the connections to be
  // ready; a server that is down then is retried in the background. Fails only on bad options.
  static Result<std::unique_ptr<Client>> Create(ClientOptions options);
  // The same on `threads`, shared with other clients, instead of io_threads threads of its own;
  // connections_per_thread connections on each of them. Destroy the client on none of them.
  static Result<std::unique_ptr<Client>> Create(ClientOptions options,
                                                std::shared_ptr<IoThreads> threads);
  virtual ~Client() = default;

  // One command; `argv` need only live during the call.
  void Command(std::span<const std::string_view> argv, ReplyCallback done) {
    Command(argv, CallOptions{}, std::move(done));
  }
  virtual void Command(std::span<const std::string_view> argv, const CallOptions& options,
                       ReplyCallback done) = 0;
  // EVALSHA; on a NOSCRIPT reply, loads the script (SCRIPT LOAD) on that connection and sends
  // the EVALSHA again, within the same deadline, invisibly to the caller. Calls that get NOSCRIPT
  // together share one SCRIPT LOAD per connection, and are re-sent in the pending slots they had.
  void EvalSha(const Script& script, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, ReplyCallback done) {
    EvalSha(script, keys, args, CallOptions{}, std::move(done));
  }
  virtual void EvalSha(const Script& script, std::span<const std::string_view> keys,
                       std::span<const std::string_view> args, const CallOptions& options,
                       ReplyCallback done) = 0;
  // A call of `call.many` with the checks queued for the same write of its connection (at most
  // coalesce_max in a call; alone, when none is). Each check keeps its own deadline and gets its
  // own reply; an error reply to the shared call (NOSCRIPT handled as above) is each check's
  // reply. `call.single` as EvalSha would send it when coalesce_max is 1 or options.asking.
  virtual void EvalShaCoalesced(const CoalescibleCall& call, const CallOptions& options,
                                ReplyCallback done) = 0;
  // Several coalescible checks queued together, in order, on one connection: each joins a
  // coalesced call as EvalShaCoalesced's would, so that a batch coalesces with the checks around
  // it. The callback gets one result per check, in order; each check has the client's deadline.
  virtual void EvalShaCoalescedBatch(std::span<const CoalescibleCall> calls,
                                     BatchReplyCallback done) = 0;
  // Several script calls queued together on one connection, so they leave in one write; the
  // callback gets one result per call, in order. NOSCRIPT is handled per call as above.
  virtual void EvalShaBatch(std::span<const ScriptCall> calls, BatchReplyCallback done) = 0;

  // A blocking form: waits for the callback (never longer than the deadline).
  Result<Reply> CommandSync(std::span<const std::string_view> argv);

  // Failure domains: the node serving `slot` now, as a small id that is stable (a node keeps its
  // id, no other node gets it), and the node's address. One server is one node: id 0, and its
  // "host:port" (or socket path) as the address of 0. A Redis Cluster has one node per master
  // (ClusterClient).
  virtual uint32_t NodeIdOf(uint16_t /*slot*/) const { return 0; }
  virtual std::string AddressOf(uint32_t id) const = 0;

  // For tests only. True when at least one connection is up and ready for commands.
  virtual bool connected_for_testing() const = 0;
  // For tests only: what was written, and how.
  virtual ClientStats stats_for_testing() const = 0;
  // For tests only: EvalSha, blocking.
  Result<Reply> EvalShaSyncForTesting(const Script& script, std::span<const std::string_view> keys,
                                      std::span<const std::string_view> args);
};

}  // namespace sluice::redis
