// TopKeys: the keys each rule denied most over the last few minutes, in bounded memory, for
// GET /v1/top and the dashboard. Only denials are recorded: "top limited keys" are the keys the
// service refused, and an allowed decision costs nothing here.
//
// Per rule, a ring of `slots` Space-Saving sketches (Metwally, Agrawal, El Abbadi 2005), one per
// slot of `slot_length` (slots are aligned to multiples of slot_length on the clock), each with
// k = counters_per_rule counters. A denial increments its key's counter in the current slot's
// sketch; a key the sketch does not hold takes over the smallest counter (count min+1, error min).
// Top merges the slots still in the window: for each key any of them holds, its count is the sum
// over the slots of the key's counter there, or, where a slot does not hold it, of the most the
// key can have had in that slot unseen (the slot's smallest count if all k counters are in use,
// else 0); its error is the same sum of the counters' errors and those unseen maxima. So, with N
// the denials counted in the window (`denied` of the report):
//   - true denials of the key in the window ≤ count, and count − error ≤ true denials;
//   - error ≤ N/k (`max_error`): no count is over by more than N/k;
//   - every key denied more than N/k times in the window is among the keys merged.
// The window is the current slot and the slots−1 before it: between (slots−1)·slot_length and
// slots·slot_length of time (by default 4 to 5 minutes); `window` in a report says how much.
//
// Memory: k counters per slot, `slots` slots per rule; a rule's sketch is made on its first
// denial and its worst case (every key kMaxKeyBytes long) is RuleBytes(). Rules are tracked while
// the sum of their worst cases stays within max_bytes; a rule beyond it is not tracked (its
// report says so) until Retain gives memory back. Keys longer than kMaxKeyBytes are counted under
// their first kMaxKeyBytes bytes.
//
// Thread safety: every method may be called concurrently. Record takes a shared lock on the rule
// map and the rule's own mutex, so denials of different rules do not contend; its work is a hash
// lookup and an O(log k) heap update.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"

namespace sluice::http {

struct TopKeysOptions {
  size_t counters_per_rule = 64;  // k, per slot
  size_t slots = 5;               // at most 64
  Duration slot_length = std::chrono::minutes(1);
  size_t max_bytes = 64 << 20;
};

struct TopKey {
  std::string key;
  uint64_t denied = 0;  // at least the key's denials in the window, at most `error` more
  uint64_t error = 0;
};

struct TopKeysReport {
  bool tracked = true;       // false: the rule is beyond max_bytes and its keys are not counted
  Duration window{0};        // the time counted: from the start of the oldest slot to now
  uint64_t denied = 0;       // N, the denials counted in the window (exact)
  uint64_t max_error = 0;    // N/k, rounded down: no key's `error` is larger
  std::vector<TopKey> keys;  // by `denied`, then by `denied - error`, descending; then by key
};

class TopKeys {
 public:
  // `clock` must outlive this object.
  explicit TopKeys(const Clock& clock, TopKeysOptions options = {});
  ~TopKeys();
  TopKeys(const TopKeys&) = delete;
  TopKeys& operator=(const TopKeys&) = delete;

  // Counts one denial of `key` by rule `rule`, now.
  void Record(std::string_view rule, std::string_view key);

  // The `n` keys of `rule` with the most denials in the window ending now.
  TopKeysReport Top(std::string_view rule, size_t n) const;

  // Forgets every rule `keep` says no to (the rules a reload removed), giving back its memory.
  void Retain(const std::function<bool(std::string_view rule)>& keep);

  // The sum of the tracked rules' RuleBytes(): at most options().max_bytes.
  size_t reserved_bytes() const;
  const TopKeysOptions& options() const { return options_; }

  // The most one rule's sketches can take (an estimate of the allocator's overhead included).
  static size_t RuleBytes(const TopKeysOptions& options);

 private:
  class RuleSketch;

  // The rule's sketch, made if memory allows; null if the rule is not tracked. Needs mu_ held
  // exclusively.
  RuleSketch* Admit(std::string_view rule);

  const Clock& clock_;
  const TopKeysOptions options_;
  mutable std::shared_mutex mu_;
  // A null sketch: a rule seen, and not tracked for want of memory.
  std::map<std::string, std::unique_ptr<RuleSketch>, std::less<>> rules_;
  size_t reserved_bytes_ = 0;
};

}  // namespace sluice::http
