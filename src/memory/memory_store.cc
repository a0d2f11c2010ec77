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
  // CheckAll's count of the new keys it would add here.
  size_t pending_new GUARDED_BY(mu) = 0;

  size_t SweepLocked(int64_t now) REQUIRES(mu) {
    return boost::unordered::erase_if(
        map, [now](const auto& kv) { return kv.second.expires_at <= now; });
  }

  // Makes room for `more` keys if the bound allows; false if the shard is too full.
  bool RoomFor(size_t more, int64_t now, size_t max_keys) REQUIRES(mu) {
    if (map.size() + more <= sweep_at_size) return true;
    if (map.size() + more > max_keys) {
      if (now - last_full_sweep < kFullSweepIntervalUs) return false;
      last_full_sweep = now;
    }
    SweepLocked(now);
    // Not std::clamp: max_keys may be below kMinSweepSize, and clamp(v, lo, hi) needs lo <= hi.
    sweep_at_size = std::min(std::max(2 * map.size(), kMinSweepSize), max_keys);
    return map.size() + more <= max_keys;
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
    if (!shard.RoomFor(1, now, max_keys_per_shard_)) return Full();
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

Status MemoryStore::Full() const {
  return Status::ResourceExhausted("memory store is full (" +
                                   std::to_string(max_keys_per_shard_ * (shard_mask_ + 1)) +
                                   " keys); no new key can be tracked until some expire");
}

// The analysis cannot follow a set of locks taken in a loop: every shard in `shards` is locked
// from the first loop to the scope's end.
Result<std::vector<Decision>> MemoryStore::DoCheckAll(std::span<const CheckRequest> requests)
    NO_THREAD_SAFETY_ANALYSIS {
  struct Item {
    std::string key;  // ComposeKey's buffer is reused by the next call
    size_t hash;
    Shard* shard;
    core::State state;  // a copy, decided on
    bool held;          // the key has a state in its shard
  };
  const int64_t now = Ticks(clock_.now());
  std::vector<Item> items;
  items.reserve(requests.size());
  std::vector<Shard*> shards;
  for (const CheckRequest& r : requests) {
    const HashedKey key = Hashed(ComposeKey(r.scope, r.key));
    Shard* shard = &ShardFor(key.hash);
    items.push_back({std::string(key.key), key.hash, shard, {}, false});
    shards.push_back(shard);
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  for (Shard* shard : shards) shard->mu.Lock();
  struct Unlock {
    std::vector<Shard*>& shards;
    ~Unlock() NO_THREAD_SAFETY_ANALYSIS {
      for (Shard* shard : shards) shard->mu.Unlock();
    }
  } unlock{shards};

  const auto find = [](Item& item) NO_THREAD_SAFETY_ANALYSIS {
    return item.shard->map.find(HashedKey{item.key, item.hash});
  };
  std::vector<Decision> decisions;
  decisions.reserve(requests.size());
  bool all_allowed = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    const CheckRequest& r = requests[i];
    Item& item = items[i];
    auto it = find(item);
    item.held = it != item.shard->map.end();
    item.state = item.held ? it->second.state : core::FreshState(*r.limit, now);
    decisions.push_back(core::Decide(*r.limit, item.state, now, r.cost));
    all_allowed = all_allowed && decisions.back().allowed;
  }
  if (!all_allowed) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!decisions[i].allowed) continue;
      // What a peek sees on the state as it was (a denied Decide writes nothing).
      auto it = find(items[i]);
      core::State state = it != items[i].shard->map.end()
                              ? it->second.state
                              : core::FreshState(*requests[i].limit, now);
      decisions[i] = core::Decide(*requests[i].limit, state, now, 0);
      decisions[i].allowed = false;
      decisions[i].retry_after = Duration(0);
    }
    return decisions;
  }
  // Room for every new key before anything is written.
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!items[i].held && decisions[i].reset_after.count() > 0) ++items[i].shard->pending_new;
  }
  bool room = true;
  for (Shard* shard : shards) {
    room = room && shard->RoomFor(shard->pending_new, now, max_keys_per_shard_);
    shard->pending_new = 0;
  }
  if (!room) return Full();
  for (size_t i = 0; i < requests.size(); ++i) {
    Item& item = items[i];
    const int64_t reset_after = decisions[i].reset_after.count();
    auto it = find(item);
    if (it == item.shard->map.end()) {
      if (reset_after > 0)
        item.shard->map.emplace(item.key, Entry{std::move(item.state), now + reset_after});
    } else if (reset_after == 0) {
      item.shard->map.erase(it);
    } else {
      it->second = Entry{std::move(item.state), now + reset_after};
    }
  }
  return decisions;
}

void MemoryStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  done(DoCheckAll(requests));
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
