// RedisStore: limiter state in Redis, shared by every process that points at the same server.
// Each check runs one Lua script that reads the key's state, decides with the same integer
// arithmetic as MemoryStore (src/core/algorithms.cc), writes the new state and sets its TTL, all
// in one atomic step: decisions on one key are linearizable across processes. Every key written
// has a TTL (the time until its state is equivalent to fresh, plus `expiry_margin`), and a state
// that is already fresh is deleted, so no key outlives its use.
//
// Time comes from Redis TIME by default, so processes with skewed clocks still agree; with
// `clock` set, the caller's clock is sent along instead.
//
// Keys are "<key_prefix><limiter name>:{<key>}" (plus ":n" for sliding_log's count that left), with
// `%`, `{` and `}` percent-encoded: the Redis Cluster hash tag is the key, so the state of every
// limiter for one key lives in one slot.
//
// CheckAll (Store::CheckAll) decides the checks whose keys one node holds in one script, all or
// nothing, atomically: on one Redis, every call; on a Redis Cluster, keys on one master, in one
// slot or several (the script flag allow-cross-slot-keys: Redis 7.0 or later). Keys on several
// masters are decided in two steps within the call's one deadline, with no retry: a read-only
// peek on every master in parallel, then, only if every check admits, a charge on every master
// in parallel, each all or nothing on its master. What is guaranteed there:
//   - never over-admission: each master admits only within its limits, and a refused peek
//     consumes nothing anywhere;
//   - under-admission by a race: if a master refuses at the charge (others consumed its keys
//     since the peek), the masters that charged keep the request's costs, and the request is
//     reported refused, their checks as refused with retry_after 0 showing their state after the
//     charge. Nothing gives those units back. An error at the charge (a master down, the deadline)
//     leaves the same: the masters that answered may have charged.
// A call whose keys span slots does not follow ASK during a slot migration (it fails with
// UNAVAILABLE, as on TRYAGAIN; see redis::CallOptions::cross_slot); MOVED is followed once.
//
// A master found through Redis Sentinel (redis+sentinel://) is followed across failovers
// (redis::SentinelClient): checks reach only a server that said it is the master, and while the
// sentinels have not yet named a new one they fail at once with UNAVAILABLE, for the failure
// policy; admissions the old master made and had not yet replicated are lost with it.
//
// Failure domains (Store::FailureDomain): one Redis is one domain, 0, named by its address; on a
// Redis Cluster, a key's domain is the master serving its slot now (redis::Client::NodeIdOf),
// named "host:port", and 0 ("none") while no master is known for the slot.
//
// Thread safety: fully thread-safe; calls from any thread share the client's multiplexed
// connections. Async callbacks run on the client's I/O threads, or inline when the call is
// refused at once (not connected, too many pending calls); they must not block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/redis_tls.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

namespace redis {
class Client;
class IoThreads;
class TlsContext;
struct CheckContext;
}  // namespace redis

struct RedisStoreOptions {
  // redis://[user:password@]host:port[/db]  or  unix:///path/to/socket[?db=N]  or, for a Redis
  // Cluster, redis+cluster://[user:password@]host:port,host:port,... (seed nodes), or, for a
  // master that Redis Sentinel watches, redis+sentinel://[user:password@]host:port,.../name (the
  // sentinels, and the name they monitor the master by; the credentials are the master's); over
  // TLS, rediss://..., rediss+cluster://... and rediss+sentinel://... (with `tls`).
  std::string url = "redis://127.0.0.1:6379";
  // The password to AUTH with, when it is kept out of the URL (read from a file or the
  // environment): the URL may then name only the user, redis://user@host:port, and a URL that
  // holds a password as well is refused. Empty: the URL's, if any. Never logged nor shown in an
  // error.
  std::string password{};
  // The sentinels' own login for a redis+sentinel:// URL: their requirepass, or with
  // `sentinel_user` a user of the sentinels' ACL (docs/redis-sentinel.md lists what it needs);
  // empty: none. The password is never logged nor shown in an error.
  std::string sentinel_user{};
  std::string sentinel_password{};
  // Deadline of each call (a check, a batch, a reset).
  Duration timeout = std::chrono::milliseconds(50);
  Duration connect_timeout = std::chrono::milliseconds(50);
  // The client's I/O threads; on a Redis Cluster, shared by the clients of all the masters.
  int io_threads = 1;
  // A single Redis only (redis://, rediss://, unix://): run its connections on these threads,
  // shared with the caller's own work, instead of io_threads of the store's own; a call made on
  // one of them goes out on a connection of that thread, and its callback runs there
  // (`sluice serve` shares its HTTP server's threads so). Null: threads of the store's own.
  std::shared_ptr<redis::IoThreads> threads{};
  // Connections per I/O thread to each Redis node; 0 for the default: 2 to a single Redis on
  // threads of its own, which keep it busy while the client handles a batch of replies
  // (src/redis/client.h); 1 to a single Redis on shared `threads`, and 1 to each master of a Redis
  // Cluster, whose batches overlap one another's: fewer, larger writes cost the client less CPU
  // per decision (docs/benchmarks.md).
  int connections_per_thread = 0;
  // Calls outstanding on one connection beyond which more are refused at once, as UNAVAILABLE:
  // Redis is not keeping up, an outage that a ResilientStore's failure policy decides.
  size_t max_pending_per_connection = 4096;
  // Checks (CheckAsync, Check) queued together for one connection's next write, of the same
  // algorithm (on a Redis Cluster, to the same master, whatever their slots), are decided by one
  // script call, up to this many in a call (from 1 to 1024; 1 sends each check in its own call).
  // Each still gets its own decision and deadline, in order per key; Redis runs one script at a
  // time, so the count bounds how long one call holds Redis (about 1-2 µs per check). See
  // docs/benchmarks.md.
  size_t coalesce_max = 64;

  // Namespace of every key this store writes; must not contain '{' or '}'. A Redis user limited
  // to the keys "<key_prefix>*" can run every command this store sends (docs/redis-acl.md).
  std::string key_prefix = "sluice:";
  // The clock decisions are made with; Redis TIME when null. Must outlive the store.
  const Clock* clock = nullptr;
  // How much longer than its state a key lives; at least 1 ms (Redis expires keys on a
  // millisecond clock). With `clock` set, make it cover the skew between the callers' clocks
  // and the Redis server's.
  Duration expiry_margin = std::chrono::milliseconds(1);
  // The TLS material of a rediss://, rediss+cluster:// or rediss+sentinel:// URL
  // (sluice/redis_tls.h); any of it with a plain URL is refused.
  RedisTlsOptions tls{};
};

class RedisStore final : public Store {
 public:
  // Connects (waiting up to connect_timeout; a server that is down is retried in the
  // background). Fails on bad options.
  static Result<std::unique_ptr<RedisStore>> Create(RedisStoreOptions options);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // The Redis keys that can hold (scope, key)'s state: the state key, then the auxiliary key.
  std::vector<std::string> KeysOf(std::string_view scope, std::string_view key) const;

  uint32_t FailureDomain(std::string_view scope, std::string_view key) const override;
  std::string FailureDomainName(uint32_t domain) const override;

  // Over TLS: reads the TLS files again (or `tls`'s other files) for the connections made from
  // now on; those established stay. On an error (a file missing, unreadable, not a certificate)
  // the files read before stay in use. Its server_name is the one the store was created with.
  // INVALID_ARGUMENT on a store not over TLS.
  Status ReloadTls(const RedisTlsOptions& tls);

 protected:
  // Every check joins the coalesced script call of its connection (Client::EvalShaCoalescedBatch):
  // a batch's checks in order on one connection, with the checks of other callers queued there.
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override;
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override;
  // One script on the key's node, as a check (a Redis Cluster's redirections followed as its).
  void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                       int64_t units, Time apply_by, StatusCallback done) override;
  // Store::CheckAll: one script per node, and on several nodes a peek before the charge (above).
  // A single request is decided as a check, coalesced with the others.
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override;

 private:
  RedisStore(std::unique_ptr<redis::Client> client, std::shared_ptr<redis::TlsContext> tls,
             RedisStoreOptions options);
  // What every check sends alike; `now` read from `clock` when set.
  redis::CheckContext Context() const;

  std::unique_ptr<redis::Client> client_;         // of one Redis, or a redis::ClusterClient
  const std::shared_ptr<redis::TlsContext> tls_;  // null: plain text
  const std::string prefix_;
  const Clock* const clock_;
  const int64_t margin_ms_;
  const Duration timeout_;
  const bool cluster_;  // a Redis Cluster: failure domains are its masters
};

}  // namespace sluice
