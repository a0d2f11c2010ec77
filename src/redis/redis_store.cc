#include "sluice/redis_store.h"

#include <optional>
#include <utility>

#include "redis/check_all.h"
#include "redis/client.h"
#include "redis/cluster_client.h"
#include "redis/cluster_slots.h"
#include "redis/error_reply.h"
#include "redis/keys.h"
#include "redis/script_call.h"
#include "redis/scripts.h"
#include "redis/sentinel_client.h"
#include "redis/tls_context.h"
#include "redis/url.h"

namespace sluice {
namespace {

// `connections` per I/O thread to each node unless the options say how many.
void ApplyTo(const RedisStoreOptions& options, int connections, redis::ClientOptions& client) {
  client.timeout = options.timeout;
  client.connect_timeout = options.connect_timeout;
  client.io_threads = options.io_threads;
  client.connections_per_thread =
      options.connections_per_thread > 0 ? options.connections_per_thread : connections;
  client.max_pending_per_connection = options.max_pending_per_connection;
  client.coalesce_max = options.coalesce_max;
}

// A client of the URL's single Redis, of its Redis Cluster (one Client per master), or of the
// master its sentinels name; `tls` gets the TLS context its connections share, if any.
Result<std::unique_ptr<redis::Client>> Connect(const RedisStoreOptions& options,
                                               std::shared_ptr<redis::TlsContext>& tls) {
  if (options.url.starts_with(redis::kSentinelScheme) ||
      options.url.starts_with(redis::kTlsSentinelScheme)) {
    auto sentinel = redis::ParseRedisSentinelUrl(options.url, options.password, options.tls);
    if (!sentinel.ok()) return sentinel.status();
    ApplyTo(options, 2, sentinel->master);
    tls = sentinel->master.tls;
    sentinel->sentinel_user = options.sentinel_user;
    sentinel->sentinel_password = options.sentinel_password;
    auto client = redis::SentinelClient::Create({.sentinel = std::move(*sentinel)});
    if (!client.ok()) return client.status();
    return std::unique_ptr<redis::Client>(std::move(*client));
  }
  if (redis::IsClusterUrl(options.url)) {
    auto cluster = redis::ParseRedisClusterUrl(options.url, options.password, options.tls);
    if (!cluster.ok()) return cluster.status();
    ApplyTo(options, 1, cluster->node);
    tls = cluster->node.tls;
    auto client = redis::ClusterClient::Create(std::move(*cluster));
    if (!client.ok()) return client.status();
    return std::unique_ptr<redis::Client>(std::move(*client));
  }
  auto single = redis::ParseRedisUrl(options.url, options.password, options.tls);
  if (!single.ok()) return single.status();
  ApplyTo(options, options.threads ? 1 : 2, *single);
  tls = single->tls;
  if (options.threads) return redis::Client::Create(std::move(*single), options.threads);
  return redis::Client::Create(std::move(*single));
}

}  // namespace

Result<std::unique_ptr<RedisStore>> RedisStore::Create(RedisStoreOptions options) {
  if (options.key_prefix.find_first_of("{}") != std::string::npos) {
    return Status::InvalidArgument(
        "key prefix must not contain '{' or '}' (the hash tag is "
        "the limiter key's), got '" +
        options.key_prefix + "'");
  }
  if (options.coalesce_max < 1 || options.coalesce_max > redis::kCoalesceMaxLimit) {
    return Status::InvalidArgument("coalesce_max must be from 1 to " +
                                   std::to_string(redis::kCoalesceMaxLimit) + ", got " +
                                   std::to_string(options.coalesce_max));
  }
  if (options.connections_per_thread < 0) {
    return Status::InvalidArgument("connections per thread must not be negative (0: the default)");
  }
  if (options.expiry_margin < std::chrono::milliseconds(1)) {
    return Status::InvalidArgument("expiry margin must be at least 1ms");
  }
  std::shared_ptr<redis::TlsContext> tls;
  auto client = Connect(options, tls);
  if (!client.ok()) return client.status();
  return std::unique_ptr<RedisStore>(
      new RedisStore(std::move(*client), std::move(tls), std::move(options)));
}

RedisStore::RedisStore(std::unique_ptr<redis::Client> client,
                       std::shared_ptr<redis::TlsContext> tls, RedisStoreOptions options)
    : client_(std::move(client)),
      tls_(std::move(tls)),
      prefix_(std::move(options.key_prefix)),
      clock_(options.clock),
      margin_ms_((options.expiry_margin.count() + 999) / 1000),
      timeout_(options.timeout),
      cluster_(redis::IsClusterUrl(options.url)) {}

RedisStore::~RedisStore() = default;

Status RedisStore::ReloadTls(const RedisTlsOptions& tls) {
  if (tls_ == nullptr) return Status::InvalidArgument("the Redis store is not over TLS");
  return tls_->Reload(tls);
}

std::vector<std::string> RedisStore::KeysOf(std::string_view scope, std::string_view key) const {
  std::string state;
  redis::AppendStateKey(state, prefix_, scope, key);
  std::string aux = state;
  aux.append(redis::kAuxSuffix);
  return {std::move(state), std::move(aux)};
}

uint32_t RedisStore::FailureDomain(std::string_view scope, std::string_view key) const {
  if (!cluster_) return 0;  // one Redis: one domain, no need to hash the key
  // The state key's slot: the auxiliary key has the same hash tag.
  redis::KeyBuffer name;
  redis::AppendStateKey(name, prefix_, scope, key);
  return client_->NodeIdOf(redis::KeySlot(name.View(0, name.size())));
}

std::string RedisStore::FailureDomainName(uint32_t domain) const {
  std::string name = client_->AddressOf(domain);
  // One Redis names domain 0; on a Redis Cluster, 0 is a slot no master is known for.
  return domain == 0 && name.empty() ? "none" : name;
}

redis::CheckContext RedisStore::Context() const {
  return {.prefix = prefix_,
          .now = clock_ != nullptr ? std::optional(clock_->now().time_since_epoch().count())
                                   : std::nullopt,
          .margin_ms = margin_ms_};
}

void RedisStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  const redis::CheckContext context = Context();
  redis::ScriptWords words;
  for (const auto& r : requests) words.AddCheck(context, r);
  const redis::ScriptWords::Views views = words.views();
  std::vector<redis::CoalescibleCall> calls;
  calls.reserve(requests.size());
  std::vector<int64_t> counts;
  counts.reserve(requests.size());
  size_t next = 0;
  for (const auto& r : requests) {
    const Algorithm algorithm = r.limit->algorithm();
    const size_t key_count = redis::CheckKeyCount(*r.limit);
    calls.push_back(
        {.single = {&redis::CheckScript(algorithm), std::span(views.data() + next, key_count),
                    std::span(views.data() + next + key_count, redis::kCheckArgs)},
         .many = &redis::CheckManyScript(algorithm),
         .own_arg = redis::kCheckCostArg});
    next += key_count + redis::kCheckArgs;
    counts.push_back(r.limit->count());
  }
  client_->EvalShaCoalescedBatch(calls, [counts = std::move(counts), done = std::move(done)](
                                            std::vector<Result<redis::Reply>> replies) {
    std::vector<Result<Decision>> decisions;
    decisions.reserve(replies.size());
    for (size_t i = 0; i < replies.size(); ++i) {
      decisions.push_back(i < counts.size() ? redis::ParseCheckReply(replies[i], counts[i])
                                            : Status::Internal("more replies than checks"));
    }
    done(std::move(decisions));
  });
}

void RedisStore::DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) {
  redis::KeyBuffer names;
  redis::AppendStateKey(names, prefix_, scope, key);
  const size_t state_size = names.size();
  names.append(redis::kAuxSuffix);
  const std::string_view argv[3] = {"DEL", names.View(0, state_size), names.View(0, names.size())};
  client_->Command(argv, [done = std::move(done)](Result<redis::Reply> reply) {
    if (!reply.ok()) return done(reply.status());
    if (reply->is_error()) return done(redis::ErrorReplyStatus(reply->str, "reset"));
    done(Status::Ok());
  });
}

void RedisStore::DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                                 int64_t units, Time apply_by, StatusCallback done) {
  redis::ScriptWords words;
  words.AddGiveBack(Context(), scope, limit, key, units, apply_by);
  const redis::ScriptWords::Views views = words.views();
  client_->EvalSha(redis::GiveBackScript(limit.algorithm()), std::span(views.data(), 1),
                   std::span(views.data() + 1, redis::kGiveBackArgs),
                   [done = std::move(done)](Result<redis::Reply> reply) {
                     done(redis::ParseGiveBackReply(reply));
                   });
}

void RedisStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  // One check, all or nothing, is a check: it joins a coalesced call like any other.
  if (requests.size() == 1) {
    return DoCheckBatchAsync(requests,
                             [done = std::move(done)](std::vector<Result<Decision>> results) {
                               if (!results.front().ok()) return done(results.front().status());
                               done(std::vector<Decision>{std::move(results.front()).value()});
                             });
  }
  redis::CheckAllAsync(*client_, Context(), timeout_, requests, std::move(done));
}

}  // namespace sluice
