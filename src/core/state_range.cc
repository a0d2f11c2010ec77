// core::InRange: whether a state read from a store is within the bounds of every state Decide
// writes (see algorithms.h).
#include "core/algorithms.h"

namespace sluice::core {
namespace {

bool IsTime(int64_t t, int64_t now) { return t >= 0 && t <= now + kMaxStateAhead; }
bool IsCount(int64_t n) { return n >= 0 && n <= Limit::kMaxCount; }

}  // namespace

bool InRange(const Limit&, const FixedWindowState& s, int64_t now) {
  return IsTime(s.latest, now) && IsCount(s.count);
}

bool InRange(const Limit&, const SlidingLogState& s, int64_t now) {
  if (s.entries.empty()) return s.first_live == 0;
  if (s.first_live > s.entries.size()) return false;
  // Running counts start at 0 and grow along the log.
  const int64_t left = s.first_live > 0 ? s.entries[s.first_live - 1].count : 0;
  const int64_t newest = s.entries.back().count;
  return IsTime(s.entries.back().at, now) && left >= 0 && newest >= left &&
         newest - left <= Limit::kMaxSlidingLogCount;
}

bool InRange(const Limit&, const SlidingWindowState& s, int64_t now) {
  return IsTime(s.window_start, now) && IsTime(s.latest, now) && IsCount(s.previous) &&
         IsCount(s.current);
}

bool InRange(const Limit& limit, const TokenBucketState& s, int64_t now) {
  return s.tokens >= -(kMaxStateAhead / limit.emission_interval().count()) &&
         s.tokens <= Limit::kMaxCount && IsTime(s.refilled_at, now);
}

bool InRange(const Limit& limit, const LeakyBucketState& s, int64_t now) {
  return s.level >= 0 &&
         s.level - limit.capacity() <= kMaxStateAhead / limit.emission_interval().count() &&
         IsTime(s.drained_at, now);
}

bool InRange(const Limit&, const GcraState& s, int64_t now) {
  return IsTime(s.theoretical_arrival, now);
}

}  // namespace sluice::core
