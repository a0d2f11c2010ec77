// Redis Sentinel for integration tests: a master and a replica (RedisServer, the replica started
// with --replicaof) and three sentinels (redis-server --sentinel) monitoring them on free loopback
// ports, with short failure detection (down-after-milliseconds 1000) and no persistence, in a
// temporary directory; everything is stopped when destroyed. Every wait is bounded. With TLS
// files, every server and sentinel also has a TLS port, which replication, the sentinels' links
// and the URL use; the plain ports stay for Cli.
// Not thread-safe; one owner (Cli may be called from any thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace sluice::testing {

struct SentinelSetup {
  std::string master_name = "sluice-master";
  // The master's and the replica's requirepass (and masterauth); empty: none.
  std::string master_password{};
  // The sentinels' own requirepass; empty: none.
  std::string sentinel_password{};
  // TLS on every process when cert_file is set (clients' certificates not required).
  RedisTlsFiles tls{};
};

// The EVALSHA calls (failed or rejected included) in the text of INFO commandstats.
long EvalShaCallsIn(const std::string& commandstats);

class RedisSentinel {
 public:
  // Starts the master, the replica, then the sentinels, and waits (up to 20 s) until every
  // sentinel knows the master, the replica and the two other sentinels. Null, after printing
  // why, if it cannot.
  static std::unique_ptr<RedisSentinel> Start(SentinelSetup setup = {});
  ~RedisSentinel();

  // redis+sentinel://[:master_password@]127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/master_name, or
  // rediss+sentinel:// with the sentinels' TLS ports.
  std::string url(bool with_password = true) const;
  const SentinelSetup& setup() const { return setup_; }
  std::vector<int> sentinel_ports() const;

  // The data servers: [0] started as the master, [1] as its replica.
  RedisServer& server(size_t i) { return *servers_[i]; }
  // The port the sentinels know data server `i` by: its TLS port with TLS, else its port.
  int DataPort(size_t i) const;
  // The one of the two on `port` (or its TLS port); null if neither is.
  RedisServer* ServerOnPort(int port);
  // A command on a data server (with its password; `port` may be its TLS port, the command goes
  // to its plain one) or a sentinel (with the sentinels').
  std::string Cli(int port, const std::vector<std::string>& args) const;
  std::string SentinelCli(size_t i, const std::vector<std::string>& args) const;

  // The master's port as sentinel `i` names it now; nullopt if it cannot say.
  std::optional<int> MasterPort(size_t i = 0) const;
  // ROLE's first word on the data server on `port` ("master", "slave"), or what it answered.
  std::string RoleOf(int port) const;
  // How many times the data server on `port` ran EVALSHA (INFO commandstats: calls, failed or
  // rejected included).
  long EvalShaCalls(int port) const;

  // SENTINEL FAILOVER on sentinel 0; false if refused.
  bool Failover();
  // Waits until every sentinel names a master other than `old_port` and that server says it is
  // the master; its port, or nullopt after `timeout`.
  std::optional<int> WaitForNewMaster(int old_port, std::chrono::milliseconds timeout);

 private:
  RedisSentinel() = default;
  bool StartSentinel(size_t i);
  bool WaitUntilAcquainted(std::chrono::milliseconds timeout) const;
  bool tls() const { return !setup_.tls.cert_file.empty(); }
  int PlainPort(int port) const;

  SentinelSetup setup_;
  std::string dir_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<int> sentinel_ports_;
  std::vector<int> sentinel_tls_ports_;
  std::vector<pid_t> sentinel_pids_;
};

}  // namespace sluice::testing
