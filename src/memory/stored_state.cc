#include "memory/stored_state.h"

#include <cassert>
#include <cstring>
#include <new>
#include <utility>

namespace sluice::memory {
namespace {

constexpr uint8_t kSlidingLog = static_cast<uint8_t>(Algorithm::kSlidingLog);

// f(the member of `s` that `kind` names); s is a StoredState, const or not.
template <typename Stored, typename F>
decltype(auto) VisitStored(uint8_t kind, Stored& s, F f) {
  switch (static_cast<Algorithm>(kind)) {
    case Algorithm::kFixedWindow:
      return f(s.fixed_window);
    case Algorithm::kSlidingLog:
      return f(s.sliding_log);
    case Algorithm::kSlidingWindow:
      return f(s.sliding_window);
    case Algorithm::kTokenBucket:
      return f(s.token_bucket);
    case Algorithm::kLeakyBucket:
      return f(s.leaky_bucket);
    case Algorithm::kGcra:
      break;
  }
  return f(s.gcra);
}

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
  return VisitStored(kind, s, [](const auto& state) { return core::State(state); });
}

bool InRange(const Limit& limit, uint8_t kind, const StoredState& s, int64_t now) {
  return VisitStored(kind, s, [&](const auto& state) { return core::InRange(limit, state, now); });
}

Decision DecideStored(const Limit& limit, uint8_t& kind, StoredState& s, int64_t now, int64_t cost,
                      int64_t max_delay) {
  if (kind != KindOf(limit.algorithm()) || !InRange(limit, kind, s, now)) {
    StoredStateTraits::Destroy(kind, s);
    kind = Construct(core::FreshState(limit, now), &s);
  }
  return VisitStored(
      kind, s, [&](auto& state) { return core::DecideOn(limit, state, now, cost, max_delay); });
}

int64_t GiveBackStored(const Limit& limit, StoredState& s, int64_t now, int64_t units) {
  return VisitStored(KindOf(limit.algorithm()), s, [&](auto& state) -> int64_t {
    if constexpr (requires { core::GiveBack(limit, state, now, units); }) {
      return core::GiveBack(limit, state, now, units);
    } else {
      assert(false);  // Store::GiveBack takes meters only
      return 0;
    }
  });
}

}  // namespace sluice::memory
