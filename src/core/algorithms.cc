#include "core/algorithms.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sluice::core {
namespace {

// A peek (cost 0) is judged as a request for one unit.
int64_t UnitsJudged(int64_t cost) { return std::max<int64_t>(cost, 1); }

int64_t WindowStart(int64_t now, int64_t period) { return now - now % period; }

Decision MakeDecision(const Limit& limit, bool allowed, int64_t remaining, int64_t retry_after,
                      int64_t reset_after, int64_t delay = 0) {
  return Decision{
      .allowed = allowed,
      .limit = limit.count(),
      .remaining = std::max<int64_t>(remaining, 0),
      .retry_after = Duration(allowed ? 0 : retry_after),
      .reset_after = Duration(std::max<int64_t>(reset_after, 0)),
      .delay = Duration(delay),
  };
}

// A meter's answer to a request that fits now, or else would fit after `wait`.
struct MeterAnswer {
  bool allowed;
  int64_t delay;        // > 0: booked
  int64_t retry_after;  // when denied
};

MeterAnswer Meter(bool fits_now, int64_t wait, int64_t cost, int64_t max_delay) {
  if (fits_now) return {true, 0, 0};
  if (cost > 0 && wait <= max_delay) return {true, wait, 0};
  return {false, 0, cost > 0 ? wait - max_delay : wait};
}

// sliding_window's estimate of the units admitted in the period ending now, `elapsed` into the
// current window. Done in doubles, in this exact order, so Lua computes the same bits.
double SlidingEstimate(int64_t previous, int64_t current, int64_t elapsed, int64_t period) {
  return static_cast<double>(previous) *
             (static_cast<double>(period - elapsed) / static_cast<double>(period)) +
         static_cast<double>(current);
}

bool SlidingAdmits(int64_t previous, int64_t current, int64_t elapsed, int64_t period,
                   int64_t units, int64_t count) {
  return SlidingEstimate(previous, current, elapsed, period) + static_cast<double>(units) <=
         static_cast<double>(count);
}

// The smallest elapsed in [lo, hi] at which the window admits `units`, or -1. The estimate
// only falls as elapsed grows, so the answer is found by bisection.
int64_t FirstAdmittingElapsed(int64_t previous, int64_t current, int64_t lo, int64_t hi,
                              int64_t period, int64_t units, int64_t count) {
  if (lo > hi || !SlidingAdmits(previous, current, hi, period, units, count)) return -1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (SlidingAdmits(previous, current, mid, period, units, count)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

Decision Decide(const Limit& limit, FixedWindowState& s, int64_t now, int64_t cost) {
  const int64_t period = limit.period().count();
  const int64_t start = WindowStart(now, period);
  if (s.window_start != start) s = {.window_start = start, .count = 0};
  const bool allowed = s.count + UnitsJudged(cost) <= limit.count();
  if (allowed) s.count += cost;
  const int64_t until_next_window = start + period - now;
  return MakeDecision(limit, allowed, limit.count() - s.count, until_next_window,
                      s.count > 0 ? until_next_window : 0);
}

Decision Decide(const Limit& limit, SlidingLogState& s, int64_t now, int64_t cost) {
  const int64_t period = limit.period().count();
  auto live = std::find_if(s.entries.begin(), s.entries.end(),
                           [&](const auto& e) { return e.at > now - period; });
  for (auto it = s.entries.begin(); it != live; ++it) s.total -= it->cost;
  s.entries.erase(s.entries.begin(), live);

  const int64_t units = UnitsJudged(cost);
  const bool allowed = s.total + units <= limit.count();
  int64_t retry_after = 0;
  if (allowed && cost > 0) {
    if (!s.entries.empty() && s.entries.back().at == now) {
      s.entries.back().cost += cost;
    } else {
      s.entries.push_back({.at = now, .cost = cost});
    }
    s.total += cost;
  } else if (!allowed) {
    // Wait for the oldest entries to leave the window until enough units are freed.
    const int64_t excess = s.total + units - limit.count();
    int64_t freed = 0;
    for (const auto& e : s.entries) {
      freed += e.cost;
      if (freed >= excess) {
        retry_after = e.at + period - now;
        break;
      }
    }
  }
  const int64_t reset_after = s.entries.empty() ? 0 : s.entries.back().at + period - now;
  return MakeDecision(limit, allowed, limit.count() - s.total, retry_after, reset_after);
}

Decision Decide(const Limit& limit, SlidingWindowState& s, int64_t now, int64_t cost) {
  const int64_t period = limit.period().count();
  const int64_t count = limit.count();
  const int64_t start = WindowStart(now, period);
  if (s.window_start != start) {
    s.previous = s.window_start == start - period ? s.current : 0;
    s.current = 0;
    s.window_start = start;
  }
  const int64_t elapsed = now - start;
  const int64_t units = UnitsJudged(cost);
  const bool allowed = SlidingAdmits(s.previous, s.current, elapsed, period, units, count);
  int64_t retry_after = 0;
  if (allowed) {
    s.current += cost;
  } else {
    // Later in this window, else in the next one (where `current` becomes `previous`), else
    // two windows on, when nothing weighs any more.
    int64_t at =
        FirstAdmittingElapsed(s.previous, s.current, elapsed + 1, period - 1, period, units, count);
    if (at >= 0) {
      retry_after = at - elapsed;
    } else if ((at = FirstAdmittingElapsed(s.current, 0, 0, period - 1, period, units, count)) >=
               0) {
      retry_after = period + at - elapsed;
    } else {
      retry_after = 2 * period - elapsed;
    }
  }
  const double left =
      static_cast<double>(count) - SlidingEstimate(s.previous, s.current, elapsed, period);
  const int64_t reset_after = s.current > 0    ? 2 * period - elapsed
                              : s.previous > 0 ? period - elapsed
                                               : 0;
  return MakeDecision(limit, allowed, static_cast<int64_t>(std::floor(left)), retry_after,
                      reset_after);
}

Decision Decide(const Limit& limit, TokenBucketState& s, int64_t now, int64_t cost,
                int64_t max_delay) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  if (s.tokens < capacity && now > s.refilled_at) {
    const int64_t earned = (now - s.refilled_at) / interval;
    s.tokens = std::min(capacity, s.tokens + earned);
    s.refilled_at = s.tokens == capacity ? now : s.refilled_at + earned * interval;
  } else if (s.tokens >= capacity) {
    s.refilled_at = now;
  }
  const int64_t units = UnitsJudged(cost);
  const int64_t into_next_token = now - s.refilled_at;
  const MeterAnswer answer =
      Meter(s.tokens >= units, (units - s.tokens) * interval - into_next_token, cost, max_delay);
  if (answer.allowed) s.tokens -= cost;
  return MakeDecision(limit, answer.allowed, s.tokens, answer.retry_after,
                      (capacity - s.tokens) * interval - into_next_token, answer.delay);
}

Decision Decide(const Limit& limit, LeakyBucketState& s, int64_t now, int64_t cost,
                int64_t max_delay) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  if (s.level > 0 && now > s.drained_at) {
    const int64_t leaked = (now - s.drained_at) / interval;
    s.level = std::max<int64_t>(0, s.level - leaked);
    s.drained_at = s.level == 0 ? now : s.drained_at + leaked * interval;
  } else if (s.level == 0) {
    s.drained_at = now;
  }
  const int64_t units = UnitsJudged(cost);
  const int64_t into_next_drop = now - s.drained_at;
  const MeterAnswer answer =
      Meter(s.level + units <= capacity, (s.level + units - capacity) * interval - into_next_drop,
            cost, max_delay);
  if (answer.allowed) s.level += cost;
  return MakeDecision(limit, answer.allowed, capacity - s.level, answer.retry_after,
                      s.level * interval - into_next_drop, answer.delay);
}

Decision Decide(const Limit& limit, GcraState& s, int64_t now, int64_t cost, int64_t max_delay) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t tolerance = limit.capacity() * interval;
  const int64_t tat = std::max(s.theoretical_arrival, now);
  const int64_t allow_at = tat + UnitsJudged(cost) * interval - tolerance;
  const MeterAnswer answer = Meter(allow_at <= now, allow_at - now, cost, max_delay);
  s.theoretical_arrival = answer.allowed ? tat + cost * interval : tat;
  return MakeDecision(limit, answer.allowed, (now + tolerance - s.theoretical_arrival) / interval,
                      answer.retry_after, s.theoretical_arrival - now, answer.delay);
}

State FreshState(const Limit& limit, int64_t now) {
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
      return FixedWindowState{};
    case Algorithm::kSlidingLog:
      return SlidingLogState{};
    case Algorithm::kSlidingWindow:
      return SlidingWindowState{};
    case Algorithm::kTokenBucket:
      return TokenBucketState{.tokens = limit.capacity(), .refilled_at = now};
    case Algorithm::kLeakyBucket:
      return LeakyBucketState{.level = 0, .drained_at = now};
    case Algorithm::kGcra:
      return GcraState{.theoretical_arrival = now};
  }
  assert(false);
  return GcraState{};
}

Decision Decide(const Limit& limit, State& state, int64_t now, int64_t cost, int64_t max_delay) {
  if (state.index() != static_cast<size_t>(limit.algorithm())) state = FreshState(limit, now);
  return std::visit(
      [&](auto& s) {
        if constexpr (requires { Decide(limit, s, now, cost, max_delay); }) {
          return Decide(limit, s, now, cost, max_delay);
        } else {
          assert(max_delay == 0);
          return Decide(limit, s, now, cost);
        }
      },
      state);
}

}  // namespace sluice::core
