// SweptTable: one shard of an in-process map from a (scope, key) pair (base::ScopedKey) to a value
// that expires, bounded in bytes and in entries. MemoryStore keeps its limiter states in it and
// ResilientStore's hot-key cache (HotKeyMap) keeps its denials; ShardedTable puts shards behind
// locks.
//
// Layout: open addressing with linear probing in Robin Hood order, one slot per entry (TableSlot,
// base/table_slot.h), slots of kSlotBytes (64: one cache line) in one array. A lookup reads one
// slot most of the time (its home, picked by the low 32 bits of the hash), and the next ones in
// the same run otherwise; a mismatching fingerprint is rejected without reading the key; Robin
// Hood order lets a lookup of an absent key stop at the first slot whose entry is nearer its own
// home. Erasing shifts the rest of the run back (no tombstones).
//
// Bounds: the slot array, the out-of-line keys and the values' heap (Traits::HeapBytes) are
// counted against Limits::max_bytes, and the entries against max_entries and 4/5 of the slots.
// An entry whose expiry has passed holds a value equivalent to none: dropping it changes nothing,
// and neither does keeping it, so that a key coming back takes its expired entry over in place
// (the owner decides on it as on none) rather than being inserted again. Making room for new
// entries (Insert, Reserve) does, in order: grow the array when the slots are what is short
// (doubling, while the old and the new array fit in the budget together; the move drops the
// expired entries); if that leaves less than 1/8 of the bounds to spare, drop every expired entry,
// then evict. Fitting the bytes after a value grew (Fit) drops the expired entries, then evicts.
// Growing before dropping keeps the entries of keys that come back after expiring (a key checked
// every few hundred ms against a 100 ms state) while the budget allows, instead of dropping and
// inserting them again at every pass. Eviction is by a CLOCK, an approximation of least recently
// used: a hand visits every slot once a round, in a scattered order (see AdvanceHand), and evicts
// an entry not looked up in its current round or the one before. So an entry looked up at least
// once a round is never evicted, and a new entry counts as not looked up: keys seen once (a flood
// of distinct keys) go before keys seen again. Each pass evicts down to 7/8 of the bound, so that
// the work is paid once per many inserts. Entries named in `keep` are never dropped or evicted.
//
// Value requirements: those of TableSlot. Traits (see PlainValueTraits) relocates, destroys and
// measures a value given its kind; the table never copies one.
//
// Thread safety: none; ShardedTable locks a shard around every call. A Slot* is valid until the
// next call that inserts, erases, reserves, fits or sweeps.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <span>
#include <string_view>

#include "base/scoped_key.h"
#include "base/slot_memory.h"
#include "base/table_slot.h"

namespace sluice::base {

template <class Value, class Traits = PlainValueTraits<Value>, size_t kSlotBytes = 64>
class SweptTable {
 public:
  using Slot = TableSlot<Value, kSlotBytes>;
  static_assert(sizeof(Slot) == kSlotBytes);
  static constexpr size_t kInitialSlots = kPageBytes / kSlotBytes;

  struct Limits {
    size_t max_bytes = std::numeric_limits<size_t>::max();
    size_t max_entries = std::numeric_limits<size_t>::max();
  };

  struct Stats {
    size_t entries = 0;
    size_t bytes = 0;  // the slot array, out-of-line keys and the values' heap
    uint64_t dropped_fresh = 0;
    uint64_t evicted_lru = 0;
  };

  SweptTable() = default;
  ~SweptTable() { Clear(); }
  SweptTable(const SweptTable&) = delete;
  SweptTable& operator=(const SweptTable&) = delete;

  void set_limits(Limits limits) { limits_ = limits; }
  const Limits& limits() const { return limits_; }

  Stats stats() const { return {size_, bytes(), dropped_fresh_, evicted_lru_}; }
  size_t size() const { return size_; }
  size_t bytes() const { return mapped_bytes_ + heap_bytes_; }

  // The entry of `key`, marked as used, or null.
  Slot* Find(const base::ScopedKey& key) {
    if (size_ == 0) return nullptr;
    const uint8_t fingerprint = Fingerprint(key.hash);
    size_t i = Home(key.hash);
    for (unsigned probe = 1;; ++probe, i = Next(i)) {
      Slot& slot = slots_[i];
      if (slot.probe < probe) return nullptr;  // empty, or nearer its home than the key would be
      if (slot.fingerprint == fingerprint && key.Matches(slot.key())) {
        slot.set_seen(round_);
        return &slot;
      }
    }
  }

  // Starts loading the first slots a lookup of `hash` reads. May be called without the table's
  // lock: it reads only the atomic copies of the array's place and size, and a stale pair costs a
  // useless load, never a fault (a prefetch does not fault).
  void Prefetch(size_t hash) const {
    const Slot* slots = prefetch_slots_.load(std::memory_order_relaxed);
    const size_t capacity = prefetch_capacity_.load(std::memory_order_relaxed);
    if (slots == nullptr) return;
    const Slot* home = slots + HomeIn(hash, capacity);
    __builtin_prefetch(home);
    __builtin_prefetch(home + 1);
  }

  // Makes room for `entries` more entries holding `heap_bytes` more on the heap (keys included),
  // as the class comment says; false if even evicting all but `keep` leaves too little.
  bool Reserve(size_t entries, size_t heap_bytes, int64_t now,
               std::span<const base::ScopedKey> keep) {
    if (capacity_ == 0 && !Resize(kInitialSlots, now, keep)) return false;
    if (Fits(entries, heap_bytes, 0)) return true;
    if (size_ + entries > LoadBound() && LoadBound() < limits_.max_entries) Grow(now, keep);
    if (Fits(entries, heap_bytes, 8)) return true;
    DropFresh(now, keep);
    while (!Fits(entries, heap_bytes, 8) && EvictOne(now, keep)) {
    }
    return Fits(entries, heap_bytes, 0);
  }

  // Adds `key`, which must be absent, with its value still to be constructed in the slot
  // returned: a value of `kind` holding `heap_bytes` (Traits::HeapBytes of it). Makes room first
  // (Reserve). Null, with nothing added, if there is none or the key cannot be copied.
  Slot* Insert(const base::ScopedKey& key, uint8_t kind, int64_t expires_at, size_t heap_bytes,
               int64_t now, std::span<const base::ScopedKey> keep) {
    const size_t key_size = key.composite_size();
    const size_t key_heap = KeyHeapBytes(key_size);
    if (!Reserve(1, key_heap + heap_bytes, now, keep)) return nullptr;
    alignas(Slot) unsigned char carry_bytes[sizeof(Slot)];
    Slot& carry = *new (carry_bytes) Slot;
    carry.fingerprint = Fingerprint(key.hash);
    carry.flags = 0;
    carry.set_kind(kind);
    carry.set_seen(static_cast<uint8_t>(round_ - 2));  // evictable at the hand's next visit
    carry.expires_at = expires_at;
    if (!RunHasRoom(key.hash)) return nullptr;
    if (key_size <= Slot::kKeyBytes) {
      carry.key_size = static_cast<uint8_t>(key_size);
      key.WriteComposite(carry.key_bytes);
    } else {
      char* copy = static_cast<char*>(std::malloc(key_size));
      if (copy == nullptr) return nullptr;
      key.WriteComposite(copy);
      const auto size = static_cast<uint32_t>(key_size);
      carry.key_size = Slot::kOutOfLine;
      std::memcpy(carry.key_bytes, &size, sizeof size);
      std::memcpy(carry.key_bytes + sizeof size, &copy, sizeof copy);
    }
    ++size_;
    heap_bytes_ += key_heap + heap_bytes;
    return Place(carry, key.hash, /*carry_has_value=*/false);
  }

  void Erase(Slot* slot) { RemoveAt(static_cast<size_t>(slot - slots_)); }

  // What a key whose composite form is `key_size` bytes takes on the heap.
  static size_t KeyHeapBytes(size_t key_size) {
    return key_size <= Slot::kKeyBytes ? 0 : ChunkBytes(key_size);
  }

  // A value's heap changed by `delta` bytes (call Fit next).
  void AddHeapBytes(ptrdiff_t delta) { heap_bytes_ += static_cast<size_t>(delta); }

  // Back within max_bytes after values grew, as Reserve makes room; never evicts `keep`.
  void Fit(int64_t now, std::span<const base::ScopedKey> keep) {
    if (bytes() <= limits_.max_bytes) return;
    DropFresh(now, keep);
    while (bytes() > limits_.max_bytes - heap_bytes_ / 8 && EvictOne(now, keep)) {
    }
  }

  // Drops every entry whose expiry has passed; returns how many.
  size_t Sweep(int64_t now) { return DropFresh(now, {}); }

 private:
  // The most entries the slots hold before a lookup's runs get long.
  size_t LoadBound() const { return capacity_ / 5 * 4 + capacity_ % 5 * 4 / 5; }
  size_t EntryBound() const { return std::min(LoadBound(), limits_.max_entries); }

  // Whether `entries` and `heap` more fit; with `slack`, also 1/slack of the bounds to spare, so
  // that the work that made room is not needed again for many inserts.
  bool Fits(size_t entries, size_t heap, size_t slack) const {
    const size_t bound = EntryBound();
    const size_t spare_entries = slack ? bound / slack : 0;
    const size_t spare_bytes = slack ? heap_bytes_ / slack : 0;
    return size_ + entries + spare_entries <= bound &&
           bytes() + heap + spare_bytes <= limits_.max_bytes;
  }

  static uint8_t Fingerprint(size_t hash) { return static_cast<uint8_t>(hash >> 56); }
  static size_t HomeIn(size_t hash, size_t capacity) {
    return static_cast<size_t>((static_cast<uint64_t>(static_cast<uint32_t>(hash)) * capacity) >>
                               32);
  }
  size_t Home(size_t hash) const { return HomeIn(hash, capacity_); }
  size_t Next(size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }
  size_t Previous(size_t i) const { return i == 0 ? capacity_ - 1 : i - 1; }

  static bool Keeps(std::span<const base::ScopedKey> keep, const Slot& slot) {
    for (const base::ScopedKey& k : keep) {
      if (Fingerprint(k.hash) == slot.fingerprint && k.Matches(slot.key())) return true;
    }
    return false;
  }

  // Moves an entry's bytes, and its value unless it has none yet.
  static void MoveSlot(Slot& from, Slot& to, bool with_value) {
    std::memcpy(static_cast<void*>(&to), &from, offsetof(Slot, value_bytes));
    if (with_value) Traits::Relocate(from.kind(), from.value(), &to.value());
  }

  // Whether an entry placed from `hash`'s home keeps every distance within a byte. Placing it
  // moves the entries from where it lands to the run's end one slot on, each one further from
  // its home; the new entry lands before any slot whose distance is below its own, so it ends no
  // further than one past an entry already there.
  bool RunHasRoom(size_t hash) const {
    for (size_t i = Home(hash); slots_[i].probe != 0; i = Next(i)) {
      if (slots_[i].probe == 0xff) return false;
    }
    return true;
  }

  // Robin Hood placement of `carry` (its probe is set here): it lands at the first slot whose
  // entry is nearer its home than `carry` would be, and the rest of the run moves one slot on,
  // in order. Returns where `carry` landed.
  Slot* Place(Slot& carry, size_t hash, bool carry_has_value) {
    size_t landing = Home(hash);
    for (carry.probe = 1; slots_[landing].probe >= carry.probe; ++carry.probe) {
      landing = Next(landing);
    }
    size_t end = landing;
    while (slots_[end].probe != 0) end = Next(end);
    for (size_t i = end; i != landing;) {
      const size_t previous = Previous(i);
      MoveSlot(slots_[previous], slots_[i], true);
      ++slots_[i].probe;
      i = previous;
    }
    MoveSlot(carry, slots_[landing], carry_has_value);
    return &slots_[landing];
  }

  void DestroyEntry(Slot& slot) {
    heap_bytes_ -= Traits::HeapBytes(slot.kind(), slot.value());
    Traits::Destroy(slot.kind(), slot.value());
    if (slot.key_size == Slot::kOutOfLine) {
      const std::string_view key = slot.key();
      heap_bytes_ -= ChunkBytes(key.size());
      std::free(const_cast<char*>(key.data()));
    }
  }

  // Erases slot i; the rest of its run moves back one slot.
  void RemoveAt(size_t i) {
    DestroyEntry(slots_[i]);
    for (size_t next = Next(i); slots_[next].probe > 1; i = next, next = Next(next)) {
      MoveSlot(slots_[next], slots_[i], true);
      --slots_[i].probe;
    }
    slots_[i].probe = 0;
    --size_;
  }

  bool Droppable(const Slot& slot, int64_t now, std::span<const base::ScopedKey> keep) const {
    return slot.expires_at <= now && !Keeps(keep, slot);
  }

  size_t DropFresh(int64_t now, std::span<const base::ScopedKey> keep) {
    size_t dropped = 0;
    // An erase pulls the next entry of the run into slot i, which is then looked at again.
    for (size_t i = 0; i < capacity_;) {
      if (slots_[i].probe != 0 && Droppable(slots_[i], now, keep)) {
        RemoveAt(i);
        ++dropped;
      } else {
        ++i;
      }
    }
    dropped_fresh_ += dropped;
    return dropped;
  }

  // Hand steps to a victim: false when every entry is kept. An entry looked up in this round of
  // the hand or the previous one stays; any other is evicted (dropped, if expired).
  bool EvictOne(int64_t now, std::span<const base::ScopedKey> keep) {
    for (size_t steps = 0; size_ > 0 && steps <= 3 * capacity_; ++steps) {
      Slot& slot = slots_[hand_];
      const bool victim = slot.probe != 0 && !Keeps(keep, slot) &&
                          (slot.expires_at <= now || ((round_ - slot.seen()) & 15) > 1);
      if (victim) {
        ++(slot.expires_at <= now ? dropped_fresh_ : evicted_lru_);
        RemoveAt(hand_);
      }
      AdvanceHand();
      if (victim) return true;
    }
    return false;
  }

  // The hand visits every slot once a round, `stride_` slots apart, so that what it evicts is
  // spread over the array: evicting a stretch of neighbouring slots at a time would leave the
  // stretch ahead of the hand, the longest unvisited, crowded into long runs.
  void AdvanceHand() {
    hand_ += stride_;
    if (hand_ >= capacity_) hand_ -= capacity_;
    if (++hand_steps_ == capacity_) {
      hand_steps_ = 0;
      ++round_;
    }
  }

  // About capacity / the golden ratio, and prime to it, so that the steps visit every slot once.
  static size_t StrideFor(size_t capacity) {
    size_t stride = static_cast<size_t>(static_cast<double>(capacity) * 0.6180339887) | 1;
    while (std::gcd(stride, capacity) != 1) stride += 2;
    return stride % capacity;
  }

  // Doubles the slots, or grows them as far as the budget allows with the old array still held,
  // when that is at least a quarter more.
  void Grow(int64_t now, std::span<const base::ScopedKey> keep) {
    const size_t held = bytes();
    if (held >= limits_.max_bytes) return;
    const size_t mapped = std::min(MappedBytes(2 * capacity_ * kSlotBytes),
                                   LargestMappingWithin(limits_.max_bytes - held));
    const size_t slots = mapped / kSlotBytes;
    if (slots >= capacity_ + capacity_ / 4) Resize(slots, now, keep);
  }

  // Moves every entry into a new array of at least `slots` slots, dropping those expired.
  bool Resize(size_t slots, int64_t now, std::span<const base::ScopedKey> keep) {
    const size_t mapped = MappedBytes(slots * kSlotBytes);
    if (bytes() + mapped > limits_.max_bytes) return false;
    Slot* fresh = static_cast<Slot*>(MapSlots(mapped));
    if (fresh == nullptr) return false;
    Slot* const old = slots_;
    const size_t old_capacity = capacity_, old_mapped = mapped_bytes_;
    slots_ = fresh;
    capacity_ = mapped / kSlotBytes;
    prefetch_slots_.store(slots_, std::memory_order_relaxed);
    prefetch_capacity_.store(capacity_, std::memory_order_relaxed);
    mapped_bytes_ += mapped;  // both arrays, until the old one is given back
    hand_ = hand_steps_ = 0;
    stride_ = StrideFor(capacity_);
    for (size_t i = 0; i < old_capacity; ++i) {
      Slot& slot = old[i];
      if (slot.probe == 0) continue;
      const size_t hash = base::HashComposite(slot.key());
      if (Droppable(slot, now, keep)) {
        DestroyEntry(slot);
        --size_;
        ++dropped_fresh_;
      } else if (!RunHasRoom(hash)) {  // never seen with a keyed hash; no distance overflows
        DestroyEntry(slot);
        --size_;
        ++evicted_lru_;
      } else {
        Place(slot, hash, true);
      }
    }
    UnmapSlots(old, old_mapped);
    mapped_bytes_ -= old_mapped;
    return true;
  }

  void Clear() {
    for (size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].probe != 0) DestroyEntry(slots_[i]);
    }
    UnmapSlots(slots_, mapped_bytes_);
    slots_ = nullptr;
    prefetch_slots_.store(nullptr, std::memory_order_relaxed);
    capacity_ = mapped_bytes_ = size_ = heap_bytes_ = 0;
  }

  Limits limits_;
  Slot* slots_ = nullptr;
  size_t capacity_ = 0;
  size_t mapped_bytes_ = 0;
  size_t size_ = 0;
  size_t heap_bytes_ = 0;  // out-of-line keys and the values' heap
  size_t hand_ = 0;        // the eviction hand's slot
  size_t hand_steps_ = 0;
  size_t stride_ = 0;
  uint8_t round_ = 0;  // the hand's rounds, modulo 256 (compared modulo 16)
  std::atomic<const Slot*> prefetch_slots_{nullptr};
  std::atomic<size_t> prefetch_capacity_{0};
  uint64_t dropped_fresh_ = 0;
  uint64_t evicted_lru_ = 0;
};

}  // namespace sluice::base
