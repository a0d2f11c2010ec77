// What a Redis client is given and gives back, apart from the client itself (client.h): its
// options, a call's options, a coalescible check, the reply callbacks and the client's counters.
// The connection (connection.h) and the reply gathering (reply_gather.h) need only these.
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/resp.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::redis {

class TlsContext;

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
  // Each connection's handshake also asks ROLE, and the connection is used only if the server
  // answers that it is a master: a master found through Redis Sentinel that has since become a
  // replica never gets a call (the connection is dropped and retried like a failed AUTH).
  bool require_master = false;
  // TLS over the socket when set (rediss://), verifying `tls_server_name` (tls_context.h).
  std::shared_ptr<TlsContext> tls;
  std::string tls_server_name;

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
  // A connection's coalesced call keeps taking checks while this many of the connection's calls
  // await their replies (or a write is in flight), and leaves when fewer do: the checks that
  // arrive during a call's round trip share the next call. 0: 1 when the client has two
  // connections or more (one's call is at Redis while the other's gathers), else 2.
  size_t coalesce_behind = 0;
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
// `own_arg`, is its own; the others it may share with the checks beside it. Checks share a call
// only with checks of the same `many` and `across_slots` (a Redis Cluster node's checks, whose
// keys are in many slots). How the call lays their words out, and splits its reply among them, is
// in script_call.h (CoalescedCallBuilder).
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

}  // namespace sluice::redis
