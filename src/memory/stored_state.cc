#include "memory/stored_state.h"

#include <cassert>
#include <cstring>
#include <new>
#include <utility>

namespace sluice::memory {
namespace {

constexpr uint8_t kSlidingLog = static_cast<uint8_t>(Algorithm::kSlidingLog);

}  // namespace

void StoredStateTraits::Relocate(uint8_t kind, StoredState& from, StoredState* to) noexcept {
  if (kind == kSlidingLog) {
    new (&to->sliding_log) core::SlidingLogState(std::move(from.sliding_log));
    from.sliding_log.~SlidingLogState();
  } else {
    // Every other state is trivially copyable.
    std::memcpy(static_cast<void*>(to), &from, sizeof(StoredState));
  }
}

void StoredStateTraits::Destroy(uint8_t kind, StoredState& state) noexcept {
  if (kind == kSlidingLog) state.sliding_log.~SlidingLogState();
}

size_t HeapBytes(const core::State& state) {
  const auto* log = std::get_if<core::SlidingLogState>(&state);
  return log ? LogBytes(*log) : 0;
}

uint8_t Construct(core::State&& state, StoredState* to) {
  const auto kind = static_cast<uint8_t>(state.index());
  std::visit([to](auto&& s) { new (to) std::decay_t<decltype(s)>(std::move(s)); },
             std::move(state));
  return kind;
}

core::State Load(uint8_t kind, const StoredState& s) {
  switch (static_cast<Algorithm>(kind)) {
    case Algorithm::kFixedWindow:
      return s.fixed_window;
    case Algorithm::kSlidingLog:
      return s.sliding_log;
    case Algorithm::kSlidingWindow:
      return s.sliding_window;
    case Algorithm::kTokenBucket:
      return s.token_bucket;
    case Algorithm::kLeakyBucket:
      return s.leaky_bucket;
    case Algorithm::kGcra:
      break;
  }
  return s.gcra;
}

bool InRange(const Limit& limit, uint8_t kind, const StoredState& s, int64_t now) {
  switch (static_cast<Algorithm>(kind)) {
    case Algorithm::kFixedWindow:
      return core::InRange(limit, s.fixed_window, now);
    case Algorithm::kSlidingLog:
      return core::InRange(limit, s.sliding_log, now);
    case Algorithm::kSlidingWindow:
      return core::InRange(limit, s.sliding_window, now);
    case Algorithm::kTokenBucket:
      return core::InRange(limit, s.token_bucket, now);
    case Algorithm::kLeakyBucket:
      return core::InRange(limit, s.leaky_bucket, now);
    case Algorithm::kGcra:
      break;
  }
  return core::InRange(limit, s.gcra, now);
}

Decision DecideStored(const Limit& limit, uint8_t& kind, StoredState& s, int64_t now, int64_t cost,
                      int64_t max_delay) {
  if (kind != KindOf(limit.algorithm()) || !InRange(limit, kind, s, now)) {
    StoredStateTraits::Destroy(kind, s);
    kind = Construct(core::FreshState(limit, now), &s);
  }
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
      return core::Decide(limit, s.fixed_window, now, cost);
    case Algorithm::kSlidingLog:
      return core::Decide(limit, s.sliding_log, now, cost);
    case Algorithm::kSlidingWindow:
      return core::Decide(limit, s.sliding_window, now, cost);
    case Algorithm::kTokenBucket:
      return core::Decide(limit, s.token_bucket, now, cost, max_delay);
    case Algorithm::kLeakyBucket:
      return core::Decide(limit, s.leaky_bucket, now, cost, max_delay);
    case Algorithm::kGcra:
      break;
  }
  return core::Decide(limit, s.gcra, now, cost, max_delay);
}

int64_t GiveBackStored(const Limit& limit, StoredState& s, int64_t now, int64_t units) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return core::GiveBack(limit, s.token_bucket, now, units);
    case Algorithm::kLeakyBucket:
      return core::GiveBack(limit, s.leaky_bucket, now, units);
    case Algorithm::kGcra:
      return core::GiveBack(limit, s.gcra, now, units);
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingLog:
    case Algorithm::kSlidingWindow:
      break;
  }
  assert(false);  // Store::GiveBack takes meters only
  return 0;
}

}  // namespace sluice::memory
