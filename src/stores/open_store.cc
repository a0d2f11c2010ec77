#include "sluice/open_store.h"

#include "redis/url.h"
#include "sluice/memory_store.h"
#include "sluice/redis_store.h"

namespace sluice {

Result<std::unique_ptr<Store>> OpenStore(std::string_view url, const OpenStoreOptions& options) {
  if (url == "memory://") {
    return std::unique_ptr<Store>(
        std::make_unique<MemoryStore>(MemoryStoreOptions{.max_memory = options.max_memory}));
  }
  if (redis::IsRedisUrl(url)) {
    auto store = RedisStore::Create(
        RedisStoreOptions{.url = std::string(url),
                          .password = options.password,
                          .sentinel_user = options.sentinel_user,
                          .sentinel_password = options.sentinel_password,
                          .timeout = options.timeout,
                          .io_threads = options.io_threads,
                          .threads = options.threads,
                          .connections_per_thread = options.connections_per_thread,
                          .coalesce_max = options.coalesce_max,
                          .key_prefix = options.key_prefix,
                          .tls = options.tls});
    if (!store.ok()) return store.status();
    return std::unique_ptr<Store>(std::move(store).value());
  }
  return Status::InvalidArgument("unknown store URL '" + redis::RedactedUrl(url) + "' (expected " +
                                 std::string(redis::kStoreUrlForms) + ")");
}

}  // namespace sluice
