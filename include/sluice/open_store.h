// OpenStore: a store from a URL, as configuration files and command lines name them:
//   memory://                                   this process's MemoryStore
//   redis://[user:password@]host:port[/db]      a RedisStore
//   unix:///path/to/redis.sock[?db=N]           a RedisStore over a Unix socket
//   redis+cluster://[user:password@]host:port,host:port,...
//                                               a RedisStore on a Redis Cluster (seed nodes)
//   rediss://...  rediss+cluster://...  rediss+sentinel://...  over TLS (OpenStoreOptions::tls)
//   redis+sentinel://[user:password@]host:port,host:port,.../master_name
//                                               a RedisStore on the master Redis Sentinel names
//   rediss+sentinel://...                        the same, the sentinels and the master over TLS
// Thread safety: OpenStore may be called from any thread; see each store for its own contract.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/redis_tls.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

namespace redis {
class IoThreads;
}  // namespace redis

struct OpenStoreOptions {
  // Deadline of each call to a remote store.
  Duration timeout = std::chrono::milliseconds(50);
  // RedisStoreOptions::key_prefix and ::password.
  std::string key_prefix = "sluice:";
  std::string password{};
  std::string sentinel_user{};      // RedisStoreOptions::sentinel_user
  std::string sentinel_password{};  // RedisStoreOptions::sentinel_password
  int io_threads = 1;
  // RedisStoreOptions::threads: a single Redis's connections on the caller's threads.
  std::shared_ptr<redis::IoThreads> threads{};
  int connections_per_thread = 0;  // RedisStoreOptions::connections_per_thread (0: its default)
  // memory://'s bound (MemoryStoreOptions::max_memory).
  size_t max_memory = MemoryStoreOptions{}.max_memory;
  // RedisStoreOptions::coalesce_max: checks decided by one script call at most.
  size_t coalesce_max = 64;
  // RedisStoreOptions::tls, for rediss://, rediss+cluster:// and rediss+sentinel://.
  RedisTlsOptions tls{};
};

Result<std::unique_ptr<Store>> OpenStore(std::string_view url,
                                         const OpenStoreOptions& options = {});

}  // namespace sluice
