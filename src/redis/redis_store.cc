#include "sluice/redis_store.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

#include "core/await.h"
#include "redis/client.h"
#include "redis/cluster_client.h"
#include "redis/cluster_slots.h"
#include "redis/keys.h"
#include "redis/scripts.h"

namespace sluice {
namespace {

// The arguments of a check script: now, margin, cost, two parameters, max_delay.
constexpr size_t kScriptArgs = 6;

// The two parameters a script takes after the cost.
std::pair<int64_t, int64_t> ScriptParameters(const Limit& limit) {
  if (IsMeter(limit.algorithm())) return {limit.capacity(), limit.emission_interval().count()};
  return {limit.count(), limit.period().count()};
}

// Decimal integers formatted into inline buffers.
class Numbers {
 public:
  static constexpr size_t kMax = kScriptArgs;
  Numbers() = default;
  Numbers(const Numbers&) = delete;
  Numbers& operator=(const Numbers&) = delete;

  void Add(int64_t n) {
    auto [end, ec] = std::to_chars(buffers_[size_], buffers_[size_] + sizeof(buffers_[size_]), n);
    views_[size_] = std::string_view(buffers_[size_], end - buffers_[size_]);
    ++size_;
  }
  void AddEmpty() { views_[size_++] = std::string_view(); }
  std::span<const std::string_view> views() const { return {views_, size_}; }

 private:
  char buffers_[kMax][24];
  std::string_view views_[kMax];
  size_t size_ = 0;
};

// Views into one growing byte string, recorded as offsets until it stops growing.
class Pieces {
 public:
  explicit Pieces(size_t reserve) { bytes_.reserve(reserve); }
  void append(std::string_view bytes) { bytes_.append(bytes); }
  size_t size() const { return bytes_.size(); }
  void Mark(size_t begin, size_t end) { spans_.emplace_back(begin, end - begin); }
  void AddNumber(int64_t n) {
    char buffer[24];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), n);
    const size_t begin = bytes_.size();
    bytes_.append(buffer, end);
    Mark(begin, bytes_.size());
  }
  void AddText(std::string_view text) {
    const size_t begin = bytes_.size();
    bytes_.append(text);
    Mark(begin, bytes_.size());
  }
  // Valid while this object lives and nothing more is added.
  std::vector<std::string_view> Views() const {
    std::vector<std::string_view> views;
    views.reserve(spans_.size());
    for (auto [pos, len] : spans_) views.push_back(std::string_view(bytes_).substr(pos, len));
    return views;
  }

 private:
  std::string bytes_;
  std::vector<std::pair<size_t, size_t>> spans_;
};

void ApplyTo(const RedisStoreOptions& options, redis::ClientOptions& client) {
  client.timeout = options.timeout;
  client.connect_timeout = options.connect_timeout;
  client.io_threads = options.io_threads;
  client.connections_per_thread = options.connections_per_thread;
  client.max_pending_per_connection = options.max_pending_per_connection;
}

// A client of the URL's single Redis, or of its Redis Cluster (one Client per master).
Result<std::unique_ptr<redis::Client>> Connect(const RedisStoreOptions& options) {
  if (options.url.starts_with(redis::kClusterScheme)) {
    auto cluster = redis::ParseRedisClusterUrl(options.url);
    if (!cluster.ok()) return cluster.status();
    ApplyTo(options, cluster->node);
    auto client = redis::ClusterClient::Create(std::move(*cluster));
    if (!client.ok()) return client.status();
    return std::unique_ptr<redis::Client>(std::move(*client));
  }
  auto single = redis::ParseRedisUrl(options.url);
  if (!single.ok()) return single.status();
  ApplyTo(options, *single);
  return redis::Client::Create(std::move(*single));
}

Status ReplyError(const std::string& message) {
  // "ERR ..." is the script failing: a bug, not the server's state.
  if (message.starts_with("ERR")) return Status::Internal("Redis check script failed: " + message);
  return Status::Unavailable("Redis refused the check: " + message);
}

Result<Decision> ToDecision(const redis::Reply& reply, int64_t limit_count) {
  if (reply.is_error()) return ReplyError(reply.str);
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::kArray || e.size() != 6 ||
      std::any_of(e.begin(), e.end(),
                  [](const auto& x) { return x.type != redis::Reply::Type::kInteger; })) {
    return Status::Internal("unexpected reply from the Redis check script");
  }
  return Decision{
      .allowed = e[0].integer == 1,
      .limit = limit_count,
      .remaining = e[1].integer,
      .retry_after = Duration(e[2].integer),
      .reset_after = Duration(e[3].integer),
      .replenish_after = Duration(e[5].integer),
      .delay = Duration(e[4].integer),
  };
}

Result<Decision> ToDecision(const Result<redis::Reply>& reply, int64_t limit_count) {
  if (!reply.ok()) return reply.status();
  return ToDecision(*reply, limit_count);
}

// sliding_log keeps the count of the units that left its log in a second key; the other algorithms
// have one key, and naming a key a script never touches would only make a migrating Cluster slot
// refuse the call.
bool HasAuxKey(const Limit& limit) { return limit.algorithm() == Algorithm::kSlidingLog; }

// Upper bound of the bytes of one request's keys, for reserving.
size_t KeyBytes(std::string_view prefix, const CheckRequest& r) {
  return prefix.size() + 3 * (r.scope.size() + r.key.size()) + 3 + redis::kAuxSuffix.size();
}

}  // namespace

Result<std::unique_ptr<RedisStore>> RedisStore::Create(RedisStoreOptions options) {
  if (options.key_prefix.find_first_of("{}") != std::string::npos) {
    return Status::InvalidArgument(
        "key prefix must not contain '{' or '}' (the hash tag is "
        "the limiter key's), got '" +
        options.key_prefix + "'");
  }
  if (options.expiry_margin < std::chrono::milliseconds(1)) {
    return Status::InvalidArgument("expiry margin must be at least 1ms");
  }
  auto client = Connect(options);
  if (!client.ok()) return client.status();
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(*client), std::move(options)));
}

RedisStore::RedisStore(std::unique_ptr<redis::Client> client, RedisStoreOptions options)
    : client_(std::move(client)),
      prefix_(std::move(options.key_prefix)),
      clock_(options.clock),
      margin_ms_((options.expiry_margin.count() + 999) / 1000) {}

RedisStore::~RedisStore() = default;

std::vector<std::string> RedisStore::KeysOf(std::string_view scope, std::string_view key) const {
  std::string state;
  redis::AppendStateKey(state, prefix_, scope, key);
  std::string aux = state;
  aux.append(redis::kAuxSuffix);
  return {std::move(state), std::move(aux)};
}

uint32_t RedisStore::FailureDomain(std::string_view scope, std::string_view key) const {
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

void RedisStore::DoCheckAsync(const CheckRequest& request, DecisionCallback done) {
  const Limit& limit = *request.limit;
  // The auxiliary key is the state key and a suffix: both are views of one buffer.
  redis::KeyBuffer names;
  redis::AppendStateKey(names, prefix_, request.scope, request.key);
  const size_t state_size = names.size();
  const bool with_aux = HasAuxKey(limit);
  if (with_aux) names.append(redis::kAuxSuffix);
  const std::string_view keys[2] = {names.View(0, state_size), names.View(0, names.size())};

  Numbers args;
  if (clock_ != nullptr) {
    args.Add(clock_->now().time_since_epoch().count());
  } else {
    args.AddEmpty();
  }
  args.Add(margin_ms_);
  args.Add(request.cost);
  const auto [a, b] = ScriptParameters(limit);
  args.Add(a);
  args.Add(b);
  args.Add(request.max_delay.count());
  client_->EvalSha(redis::CheckScript(limit.algorithm()), std::span(keys, with_aux ? 2 : 1),
                   args.views(),
                   [count = limit.count(), done = std::move(done)](Result<redis::Reply> reply) {
                     done(ToDecision(reply, count));
                   });
}

void RedisStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  size_t reserve = 0;
  for (const auto& r : requests) reserve += KeyBytes(prefix_, r) + kScriptArgs * 20;
  Pieces pieces(reserve);
  std::optional<int64_t> now;
  if (clock_ != nullptr) now = clock_->now().time_since_epoch().count();
  std::vector<size_t> key_counts;
  key_counts.reserve(requests.size());
  for (const auto& r : requests) {
    const size_t begin = pieces.size();
    redis::AppendStateKey(pieces, prefix_, r.scope, r.key);
    pieces.Mark(begin, pieces.size());
    const bool with_aux = HasAuxKey(*r.limit);
    if (with_aux) {
      pieces.append(redis::kAuxSuffix);
      pieces.Mark(begin, pieces.size());
    }
    key_counts.push_back(with_aux ? 2 : 1);
    if (now) {
      pieces.AddNumber(*now);
    } else {
      pieces.AddText("");
    }
    pieces.AddNumber(margin_ms_);
    pieces.AddNumber(r.cost);
    const auto [a, b] = ScriptParameters(*r.limit);
    pieces.AddNumber(a);
    pieces.AddNumber(b);
    pieces.AddNumber(r.max_delay.count());
  }
  const std::vector<std::string_view> views = pieces.Views();
  std::vector<redis::ScriptCall> calls;
  calls.reserve(requests.size());
  std::vector<int64_t> counts;
  counts.reserve(requests.size());
  size_t next = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::span<const std::string_view> keys(views.data() + next, key_counts[i]);
    const std::span<const std::string_view> args(views.data() + next + key_counts[i], kScriptArgs);
    next += key_counts[i] + kScriptArgs;
    calls.push_back({&redis::CheckScript(requests[i].limit->algorithm()), keys, args});
    counts.push_back(requests[i].limit->count());
  }
  client_->EvalShaBatch(calls, [counts = std::move(counts),
                                done = std::move(done)](std::vector<Result<redis::Reply>> replies) {
    std::vector<Result<Decision>> decisions;
    decisions.reserve(replies.size());
    for (size_t i = 0; i < replies.size(); ++i) {
      decisions.push_back(i < counts.size() ? ToDecision(replies[i], counts[i])
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
    if (reply->is_error()) return done(Status::Unavailable("Redis refused DEL: " + reply->str));
    done(Status::Ok());
  });
}

void RedisStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  size_t reserve = 0;
  for (const auto& r : requests) reserve += KeyBytes(prefix_, r) * 2 + 5 * 20;

  Pieces pieces(reserve);
  size_t key_count = 0;
  for (const auto& r : requests) {
    const size_t begin = pieces.size();
    redis::AppendStateKey(pieces, prefix_, r.scope, r.key);
    pieces.Mark(begin, pieces.size());
    ++key_count;
    if (HasAuxKey(*r.limit)) {
      pieces.append(redis::kAuxSuffix);
      pieces.Mark(begin, pieces.size());
      ++key_count;
    }
  }
  if (clock_ != nullptr) {
    pieces.AddNumber(clock_->now().time_since_epoch().count());
  } else {
    pieces.AddText("");
  }
  pieces.AddNumber(margin_ms_);
  pieces.AddNumber(static_cast<int64_t>(requests.size()));
  std::vector<int64_t> counts;
  counts.reserve(requests.size());
  for (const auto& r : requests) {
    pieces.AddText(AlgorithmName(r.limit->algorithm()));
    pieces.AddNumber(HasAuxKey(*r.limit) ? 2 : 1);
    pieces.AddNumber(r.cost);
    const auto [a, b] = ScriptParameters(*r.limit);
    pieces.AddNumber(a);
    pieces.AddNumber(b);
    counts.push_back(r.limit->count());
  }
  const std::vector<std::string_view> views = pieces.Views();
  client_->EvalSha(
      redis::CheckAllScript(), std::span(views.data(), key_count),
      std::span(views.data() + key_count, views.size() - key_count),
      [counts = std::move(counts), done = std::move(done)](Result<redis::Reply> reply) {
        if (!reply.ok()) return done(reply.status());
        if (reply->is_error()) return done(ReplyError(reply->str));
        if (reply->type != redis::Reply::Type::kArray || reply->elements.size() != counts.size()) {
          return done(Status::Internal("unexpected reply from the Redis CheckAll script"));
        }
        std::vector<Decision> decisions;
        decisions.reserve(counts.size());
        for (size_t i = 0; i < counts.size(); ++i) {
          Result<Decision> d = ToDecision(reply->elements[i], counts[i]);
          if (!d.ok()) return done(d.status());
          decisions.push_back(*d);
        }
        done(std::move(decisions));
      });
}

}  // namespace sluice
