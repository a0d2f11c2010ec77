#include "sluice/memory_store.h"

#include <algorithm>
#include <bit>
#include <boost/unordered/unordered_flat_map.hpp>
#include <functional>
#include <string>

#include "core/algorithms.h"
#include "core/composite_key.h"
#include "core/mutex.h"

namespace sluice {
namespace {

struct Entry {
  core::State state;
  int64_t expires_at;  // the state is equivalent to fresh from then on
};

using core::ComposeKey;
using core::Hashed;
using core::HashedKey;
using Map = boost::unordered_flat_map<std::string, Entry, core::KeyHash, core::KeyEqual>;

constexpr size_t kMinSweepSize = 1024;
// When a shard is full, sweeping it again sooner than this finds too little to be worth O(n).
constexpr int64_t kFullSweepIntervalUs = 10'000;

int64_t Ticks(Time t) { return t.time_since_epoch().count(); }

}  // namespace

struct alignas(64) MemoryStore::Shard {
  core::Mutex mu;
  Map map GUARDED_BY(mu);
  size_t sweep_at_size GUARDED_BY(mu) = kMinSweepSize;
  int64_t last_full_sweep GUARDED_BY(mu) = 0;

  size_t SweepLocked(int64_t now) REQUIRES(mu) {
    return boost::unordered::erase_if(
        map, [now](const auto& kv) { return kv.second.expires_at <= now; });
  }

  // Makes room for one more key if the bound allows; false if the shard is full.
  bool RoomForOneMore(int64_t now, size_t max_keys) REQUIRES(mu) {
    if (map.size() < sweep_at_size) return true;
    if (map.size() >= max_keys) {
      if (now - last_full_sweep < kFullSweepIntervalUs) return false;
      last_full_sweep = now;
    }
    SweepLocked(now);
    // Not std::clamp: max_keys may be below kMinSweepSize, and clamp(v, lo, hi) needs lo <= hi.
    sweep_at_size = std::min(std::max(2 * map.size(), kMinSweepSize), max_keys);
    return map.size() < max_keys;
  }
};

// No lock for the shards' bounds: no other thread can see them yet.
MemoryStore::MemoryStore(MemoryStoreOptions options) NO_THREAD_SAFETY_ANALYSIS
    : clock_(options.clock ? *options.clock : SystemClock::Instance()) {
  const size_t shards = std::bit_ceil(std::max<size_t>(options.shards, 1));
  shard_mask_ = shards - 1;
  max_keys_per_shard_ = std::max<size_t>((options.max_keys + shards - 1) / shards, 1);
  shards_ = std::make_unique<Shard[]>(shards);
  for (size_t i = 0; i < shards; ++i) {
    shards_[i].sweep_at_size = std::min(kMinSweepSize, max_keys_per_shard_);
  }
}

MemoryStore::~MemoryStore() = default;

MemoryStore::Shard& MemoryStore::ShardFor(size_t hash) {
  return shards_[core::ShardIndex(hash, shard_mask_ + 1)];
}

Result<Decision> MemoryStore::DoCheck(const CheckRequest& request) {
  const Limit& limit = *request.limit;
  const HashedKey key = Hashed(ComposeKey(request.scope, request.key));
  Shard& shard = ShardFor(key.hash);
  const int64_t now = Ticks(clock_.now());

  core::MutexLock lock(shard.mu);
  auto it = shard.map.find(key);
  if (it == shard.map.end()) {
    core::State fresh = core::FreshState(limit, now);
    Decision decision = core::Decide(limit, fresh, now, request.cost, request.max_delay.count());
    if (decision.reset_after.count() == 0) return decision;  // nothing consumed: keep nothing
    if (!shard.RoomForOneMore(now, max_keys_per_shard_)) {
      return Status::ResourceExhausted("memory store is full (" +
                                       std::to_string(max_keys_per_shard_ * (shard_mask_ + 1)) +
                                       " keys); no new key can be tracked until some expire");
    }
    shard.map.emplace(std::string(key.key),
                      Entry{std::move(fresh), now + decision.reset_after.count()});
    return decision;
  }
  Decision decision =
      core::Decide(limit, it->second.state, now, request.cost, request.max_delay.count());
  if (decision.reset_after.count() == 0) {
    shard.map.erase(it);
  } else {
    it->second.expires_at = now + decision.reset_after.count();
  }
  return decision;
}

void MemoryStore::DoCheckAsync(const CheckRequest& request, DecisionCallback done) {
  done(DoCheck(request));
}

std::vector<Result<Decision>> MemoryStore::DoCheckBatch(std::span<const CheckRequest> requests) {
  std::vector<Result<Decision>> results;
  results.reserve(requests.size());
  for (const auto& r : requests) results.push_back(DoCheck(r));
  return results;
}

void MemoryStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  done(DoCheckBatch(requests));
}

Status MemoryStore::DoReset(std::string_view scope, std::string_view key) {
  const HashedKey composite = Hashed(ComposeKey(scope, key));
  Shard& shard = ShardFor(composite.hash);
  core::MutexLock lock(shard.mu);
  auto it = shard.map.find(composite);
  if (it != shard.map.end()) shard.map.erase(it);
  return Status::Ok();
}

void MemoryStore::DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) {
  done(DoReset(scope, key));
}

size_t MemoryStore::size() const {
  size_t total = 0;
  for (size_t i = 0; i <= shard_mask_; ++i) {
    core::MutexLock lock(shards_[i].mu);
    total += shards_[i].map.size();
  }
  return total;
}

size_t MemoryStore::Sweep() {
  const int64_t now = Ticks(clock_.now());
  size_t dropped = 0;
  for (size_t i = 0; i <= shard_mask_; ++i) {
    core::MutexLock lock(shards_[i].mu);
    dropped += shards_[i].SweepLocked(now);
  }
  return dropped;
}

}  // namespace sluice
