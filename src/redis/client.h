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

#include "redis/client_options.h"
#include "redis/resp.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::redis {

class IoThreads;

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
  // A call of `call.many` with the checks queued on its connection while the connection's calls
  // ahead await their replies (ClientOptions::coalesce_behind; at most coalesce_max in a call;
  // alone, when none is). Each check keeps its own deadline and gets its own reply; an error
  // reply to the shared call (NOSCRIPT handled as above) is each check's reply. `call.single` as
  // EvalSha would send it when coalesce_max is 1 or options.asking.
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

  // OK when at least one connection is up and ready for commands, its handshake passed (with
  // ClientOptions::require_master, the server answered ROLE as a master); else why none is.
  virtual Status Connected() const = 0;
  // For tests only: what was written, and how.
  virtual ClientStats stats_for_testing() const = 0;
  // For tests only: EvalSha, blocking.
  Result<Reply> EvalShaSyncForTesting(const Script& script, std::span<const std::string_view> keys,
                                      std::span<const std::string_view> args);
};

}  // namespace sluice::redis
