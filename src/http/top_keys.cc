#include "http/top_keys.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <span>
#include <unordered_map>

#include "base/mutex.h"
#include "sluice/store.h"

namespace sluice::http {
namespace {

// Per counter, beyond its key's bytes: the counter, its heap entry, its hash map node and bucket,
// and the allocator's headers, rounded up.
constexpr size_t kCounterOverheadBytes = 160;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The slot a time falls in: its start, in slot lengths since the clock's epoch.
int64_t SlotOf(Time t, Duration slot_length) {
  return FloorDiv(t.time_since_epoch().count(), slot_length.count());
}

// The time counted at `now` when `current` is the newest slot: the slots before it, whole, and
// the current one so far.
Duration WindowAt(Time now, int64_t current, const TopKeysOptions& options) {
  const Duration into_current =
      std::max(Duration(0), now.time_since_epoch() - current * options.slot_length);
  return static_cast<int64_t>(options.slots - 1) * options.slot_length + into_current;
}

// One slot's Space-Saving sketch of k counters. The counters never move (their keys are viewed
// by the index); a min-heap of their positions finds the smallest.
class SpaceSaving {
 public:
  struct Counter {
    std::string key;
    uint64_t count = 0;
    uint64_t error = 0;
    uint32_t heap_position = 0;
  };

  explicit SpaceSaving(size_t k) : k_(k) {
    counters_.reserve(k);
    heap_.reserve(k);
    index_.reserve(k);
  }

  void Clear() {
    index_.clear();
    heap_.clear();
    used_ = 0;
    total_ = 0;
  }

  void Add(std::string_view key) {
    ++total_;
    if (auto it = index_.find(key); it != index_.end()) {
      Counter& c = counters_[it->second];
      ++c.count;
      SiftDown(c.heap_position);
      return;
    }
    if (used_ < k_) {
      if (used_ == counters_.size()) counters_.emplace_back();
      const auto position = static_cast<uint32_t>(used_++);
      Counter& c = counters_[position];
      SetKey(c, key);
      c.count = 1;
      c.error = 0;
      c.heap_position = static_cast<uint32_t>(heap_.size());
      heap_.push_back(position);
      index_.emplace(c.key, position);
      SiftUp(c.heap_position);
      return;
    }
    // Full: the key takes over the smallest counter, whose count it may have had unseen.
    const uint32_t position = heap_.front();
    Counter& c = counters_[position];
    index_.erase(c.key);
    SetKey(c, key);
    c.error = c.count;
    ++c.count;
    index_.emplace(c.key, position);
    SiftDown(0);
  }

  uint64_t total() const { return total_; }
  // The most a key this sketch does not hold can have been counted.
  uint64_t unseen_max() const { return used_ < k_ ? 0 : counters_[heap_.front()].count; }
  std::span<const Counter> counters() const { return {counters_.data(), used_}; }

 private:
  // An exact-size copy when the key is longer than the string's capacity, so no string holds
  // more than the longest key it was given.
  static void SetKey(Counter& c, std::string_view key) {
    if (key.size() > c.key.capacity()) {
      c.key = std::string(key);
    } else {
      c.key.assign(key);
    }
  }

  uint64_t CountAt(size_t heap_index) const { return counters_[heap_[heap_index]].count; }

  void Swap(size_t a, size_t b) {
    std::swap(heap_[a], heap_[b]);
    counters_[heap_[a]].heap_position = static_cast<uint32_t>(a);
    counters_[heap_[b]].heap_position = static_cast<uint32_t>(b);
  }

  void SiftUp(size_t i) {
    while (i > 0 && CountAt((i - 1) / 2) > CountAt(i)) {
      Swap(i, (i - 1) / 2);
      i = (i - 1) / 2;
    }
  }

  void SiftDown(size_t i) {
    for (;;) {
      size_t smallest = i;
      for (size_t child : {2 * i + 1, 2 * i + 2}) {
        if (child < heap_.size() && CountAt(child) < CountAt(smallest)) smallest = child;
      }
      if (smallest == i) return;
      Swap(i, smallest);
      i = smallest;
    }
  }

  const size_t k_;
  std::vector<Counter> counters_;  // capacity k: never reallocated, so index_'s views hold
  size_t used_ = 0;                // counters_[0, used_) are in use
  std::vector<uint32_t> heap_;     // positions in counters_, smallest count first
  std::unordered_map<std::string_view, uint32_t> index_;  // key → position in counters_
  uint64_t total_ = 0;                                    // keys added
};

}  // namespace

class TopKeys::RuleSketch {
 public:
  explicit RuleSketch(const TopKeysOptions& options) : options_(options) {
    ring_.reserve(options.slots);
    for (size_t i = 0; i < options.slots; ++i) {
      ring_.push_back(Slot{kNone, SpaceSaving(options.counters_per_rule)});
    }
  }

  void Record(Time now, std::string_view key) {
    base::MutexLock lock(mu_);
    // A clock that steps back counts in the newest slot: time never runs backwards here.
    latest_ = std::max(latest_, SlotOf(now, options_.slot_length));
    Slot& slot = ring_[static_cast<size_t>(latest_ % static_cast<int64_t>(ring_.size()))];
    if (slot.epoch != latest_) {
      slot.sketch.Clear();
      slot.epoch = latest_;
    }
    slot.sketch.Add(key.substr(0, kMaxKeyBytes));
  }

  TopKeysReport Top(Time now, size_t n) const {
    struct Estimate {
      uint64_t count = 0;
      uint64_t error = 0;
      uint64_t slots_holding = 0;  // bit i: slot i holds the key
    };
    TopKeysReport report;
    base::MutexLock lock(mu_);
    const auto slots = static_cast<int64_t>(ring_.size());
    const int64_t current = std::max(latest_, SlotOf(now, options_.slot_length));
    const int64_t oldest = current - slots + 1;
    report.window = WindowAt(now, current, options_);

    std::vector<const Slot*> live;
    for (const Slot& slot : ring_) {
      if (slot.epoch != kNone && slot.epoch >= oldest && slot.epoch <= current)
        live.push_back(&slot);
    }
    std::unordered_map<std::string_view, Estimate> merged;
    for (size_t i = 0; i < live.size(); ++i) {
      report.denied += live[i]->sketch.total();
      for (const SpaceSaving::Counter& c : live[i]->sketch.counters()) {
        Estimate& e = merged[c.key];
        e.count += c.count;
        e.error += c.error;
        e.slots_holding |= uint64_t{1} << i;
      }
    }
    report.max_error = report.denied / options_.counters_per_rule;
    for (auto& [key, e] : merged) {
      for (size_t i = 0; i < live.size(); ++i) {
        if ((e.slots_holding & (uint64_t{1} << i)) != 0) continue;
        e.count += live[i]->sketch.unseen_max();
        e.error += live[i]->sketch.unseen_max();
      }
    }

    std::vector<std::pair<std::string_view, Estimate>> ranked(merged.begin(), merged.end());
    const auto before = [](const auto& a, const auto& b) {
      if (a.second.count != b.second.count) return a.second.count > b.second.count;
      const uint64_t a_least = a.second.count - a.second.error;
      const uint64_t b_least = b.second.count - b.second.error;
      if (a_least != b_least) return a_least > b_least;
      return a.first < b.first;
    };
    const size_t shown = std::min(n, ranked.size());
    std::partial_sort(ranked.begin(), ranked.begin() + static_cast<ptrdiff_t>(shown), ranked.end(),
                      before);
    report.keys.reserve(shown);
    for (size_t i = 0; i < shown; ++i) {
      report.keys.push_back(
          {std::string(ranked[i].first), ranked[i].second.count, ranked[i].second.error});
    }
    return report;
  }

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

  struct Slot {
    int64_t epoch;  // SlotOf its times; kNone: unused
    SpaceSaving sketch;
  };

  const TopKeysOptions options_;
  mutable base::Mutex mu_;
  std::vector<Slot> ring_ SLUICE_GUARDED_BY(mu_);  // the slot of epoch e is ring_[e % slots]
  int64_t latest_ SLUICE_GUARDED_BY(mu_) = kNone;
};

TopKeys::TopKeys(const Clock& clock, TopKeysOptions options) : clock_(clock), options_(options) {
  assert(options_.counters_per_rule > 0);
  assert(options_.slots > 0 && options_.slots <= 64);
  assert(options_.slot_length.count() > 0);
}

TopKeys::~TopKeys() = default;

size_t TopKeys::RuleBytes(const TopKeysOptions& options) {
  return sizeof(RuleSketch) +
         options.slots * (sizeof(SpaceSaving) +
                          options.counters_per_rule * (kMaxKeyBytes + kCounterOverheadBytes));
}

void TopKeys::Record(std::string_view rule, std::string_view key) {
  const Time now = clock_.now();
  {
    std::shared_lock lock(mu_);
    if (auto it = rules_.find(rule); it != rules_.end()) {
      if (it->second != nullptr) it->second->Record(now, key);
      return;
    }
  }
  std::unique_lock lock(mu_);
  if (RuleSketch* sketch = Admit(rule)) sketch->Record(now, key);
}

TopKeys::RuleSketch* TopKeys::Admit(std::string_view rule) {
  auto [it, added] = rules_.try_emplace(std::string(rule));
  if (added && reserved_bytes_ + RuleBytes(options_) <= options_.max_bytes) {
    it->second = std::make_unique<RuleSketch>(options_);
    reserved_bytes_ += RuleBytes(options_);
  }
  return it->second.get();
}

TopKeysReport TopKeys::Top(std::string_view rule, size_t n) const {
  const Time now = clock_.now();
  std::shared_lock lock(mu_);
  auto it = rules_.find(rule);
  if (it != rules_.end() && it->second != nullptr) return it->second->Top(now, n);
  // No denial counted: untracked, or none yet (and then tracked if memory allows it still).
  TopKeysReport report;
  report.tracked =
      it == rules_.end() && reserved_bytes_ + RuleBytes(options_) <= options_.max_bytes;
  report.window = WindowAt(now, SlotOf(now, options_.slot_length), options_);
  return report;
}

void TopKeys::Retain(const std::function<bool(std::string_view rule)>& keep) {
  std::unique_lock lock(mu_);
  std::erase_if(rules_, [&](const auto& entry) {
    const bool drop = entry.second == nullptr || !keep(entry.first);
    if (drop && entry.second != nullptr) reserved_bytes_ -= RuleBytes(options_);
    return drop;
  });
}

size_t TopKeys::reserved_bytes() const {
  std::shared_lock lock(mu_);
  return reserved_bytes_;
}

}  // namespace sluice::http
