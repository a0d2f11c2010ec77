#include "core/algorithms.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sluice::core {
namespace {

// A peek (cost 0) is judged as a request for one unit.
int64_t UnitsJudged(int64_t cost) { return std::max<int64_t>(cost, 1); }

int64_t WindowStart(int64_t t, int64_t period) { return t - t % period; }

struct Waits {
  int64_t retry_after;      // when denied
  int64_t reset_after;      // until the state is equivalent to fresh
  int64_t replenish_after;  // until more than `remaining` can be admitted
  int64_t delay = 0;        // a booking's wait
};

Decision MakeDecision(const Limit& limit, bool allowed, int64_t remaining, const Waits& waits) {
  return Decision{
      .allowed = allowed,
      .limit = limit.count(),
      .remaining = remaining,
      .retry_after = Duration(allowed ? 0 : waits.retry_after),
      .reset_after = Duration(std::max<int64_t>(waits.reset_after, 0)),
      .replenish_after = Duration(waits.replenish_after),
      .delay = Duration(waits.delay),
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

// The wait after `elapsed` until the window admits `units` (<= count): later in this window, else
// in the next one (where `current` becomes `previous`), else two windows on, when nothing weighs
// any more.
int64_t SlidingWait(int64_t previous, int64_t current, int64_t elapsed, int64_t period,
                    int64_t units, int64_t count) {
  int64_t at =
      FirstAdmittingElapsed(previous, current, elapsed + 1, period - 1, period, units, count);
  if (at >= 0) return at - elapsed;
  at = FirstAdmittingElapsed(current, 0, 0, period - 1, period, units, count);
  if (at >= 0) return period + at - elapsed;
  return 2 * period - elapsed;
}

// token_bucket and leaky_bucket are one meter seen from two sides: its free units are the tokens,
// or the capacity less the level. They come back one an emission interval; `at` keeps the time of
// a partial one.
struct Bucket {
  // Below zero when booked ahead, or when a burst lowered since left leaky_bucket's level above
  // the capacity (it drains before anything fits); above the capacity when a burst lowered since
  // left token_bucket's tokens above it (a refill clamps them).
  int64_t free;
  int64_t at;
};

Bucket AsBucket(const Limit&, const TokenBucketState& s) {
  return {.free = s.tokens, .at = s.refilled_at};
}
Bucket AsBucket(const Limit& limit, const LeakyBucketState& s) {
  return {.free = limit.capacity() - s.level, .at = s.drained_at};
}
void Keep(const Limit&, const Bucket& b, TokenBucketState& s) {
  s = {.tokens = b.free, .refilled_at = b.at};
}
void Keep(const Limit& limit, const Bucket& b, LeakyBucketState& s) {
  s = {.level = limit.capacity() - b.free, .drained_at = b.at};
}

// Runs `f` on the state seen as a Bucket, and keeps the bucket it leaves.
template <typename BucketState, typename F>
auto OnBucket(const Limit& limit, BucketState& s, F f) {
  Bucket bucket = AsBucket(limit, s);
  const auto result = f(bucket);
  Keep(limit, bucket, s);
  return result;
}

// The bucket refilled to `now`, as a check sees it.
Bucket Refilled(const Limit& limit, const Bucket& b, int64_t now) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  if (b.free >= capacity) {
    // Full, or above a burst lowered since: the capacity, whose refill starts now.
    return {.free = capacity, .at = now};
  }
  if (now <= b.at) return b;
  const int64_t earned = (now - b.at) / interval;
  const int64_t free = std::min(capacity, b.free + earned);
  return {.free = free, .at = free == capacity ? now : b.at + earned * interval};
}

// The wait until `units` are free in a bucket refilled to now, with `free` units, `since_refill`
// after its `at` (negative when the clock is behind it: the next unit is that much further).
int64_t WaitFor(const Limit& limit, int64_t units, int64_t free, int64_t since_refill) {
  return (units - free) * limit.emission_interval().count() - since_refill;
}

Decision Decide(const Limit& limit, Bucket& b, int64_t now, int64_t cost, int64_t max_delay) {
  const int64_t capacity = limit.capacity();
  const Bucket refilled = Refilled(limit, b, now);
  int64_t free = refilled.free;
  const auto wait_for = [&](int64_t units) {
    return WaitFor(limit, units, free, now - refilled.at);
  };
  const int64_t units = UnitsJudged(cost);
  const MeterAnswer answer = Meter(free >= units, wait_for(units), cost, max_delay);
  if (answer.allowed && cost > 0) {
    free -= cost;
    b = {.free = free, .at = refilled.at};
  }
  const int64_t remaining = std::max<int64_t>(free, 0);
  return MakeDecision(limit, answer.allowed, remaining,
                      {.retry_after = answer.retry_after,
                       .reset_after = wait_for(capacity),
                       .replenish_after = remaining < capacity ? wait_for(remaining + 1) : 0,
                       .delay = answer.delay});
}

int64_t GiveBack(const Limit& limit, Bucket& b, int64_t now, int64_t units) {
  const int64_t capacity = limit.capacity();
  b = Refilled(limit, b, now);
  b.free = std::min(capacity, b.free + units);
  if (b.free == capacity) b.at = now;  // as a refill to full
  return std::max<int64_t>(WaitFor(limit, capacity, b.free, now - b.at), 0);
}

}  // namespace

Decision Decide(const Limit& limit, FixedWindowState& s, int64_t now, int64_t cost) {
  const int64_t period = limit.period().count();
  // The count is of the latest admission's window. It is current while that window is now's,
  // or later than now's (the clock went back); otherwise, also after a period change, it counts
  // only if the latest admission falls in now's window.
  const int64_t start = WindowStart(std::max(now, s.latest), period);
  int64_t count = s.latest >= start ? s.count : 0;
  const bool allowed = count + UnitsJudged(cost) <= limit.count();
  if (allowed && cost > 0) {
    count += cost;
    s = {.latest = std::max(now, s.latest), .count = count};
  }
  // Every unit comes back when the window ends.
  const int64_t until_next_window = start + period - now;
  const int64_t wait = count > 0 ? until_next_window : 0;
  return MakeDecision(
      limit, allowed, std::max<int64_t>(limit.count() - count, 0),
      {.retry_after = until_next_window, .reset_after = wait, .replenish_after = wait});
}

Decision Decide(const Limit& limit, SlidingLogState& s, int64_t now, int64_t cost) {
  const int64_t period = limit.period().count();
  auto& log = s.entries;
  const auto first_live = [&] { return log.begin() + static_cast<std::ptrdiff_t>(s.first_live); };
  // Entries at or before now - P have left the window.
  s.first_live = std::upper_bound(first_live(), log.end(), now - period,
                                  [](int64_t horizon, const auto& e) { return horizon < e.at; }) -
                 log.begin();
  if (s.first_live > 1 && s.first_live > log.size() / 2) {
    log.erase(log.begin(), first_live() - 1);
    s.first_live = 1;
  }
  const int64_t left = s.first_live > 0 ? log[s.first_live - 1].count : 0;  // units gone
  int64_t total = log.empty() ? 0 : log.back().count - left;

  const int64_t count = limit.count();
  const int64_t units = UnitsJudged(cost);
  const bool allowed = total + units <= count;
  if (allowed && cost > 0) {
    // Simultaneous admissions share an entry; so do admissions while the clock is behind the
    // newest entry, which keeps the log in time order and counts them until that entry leaves.
    if (!log.empty() && log.back().at >= now) {
      log.back().count += cost;
    } else {
      log.push_back({.at = now, .count = (log.empty() ? 0 : log.back().count) + cost});
    }
    total += cost;
  }
  // The wait until `need` more units have left the window: the first live entry whose running
  // count reaches left + need leaves P after it came.
  const auto wait_for = [&](int64_t need) {
    const auto e = std::lower_bound(first_live(), log.end(), left + need,
                                    [](const auto& entry, int64_t n) { return entry.count < n; });
    return e->at + period - now;
  };
  const int64_t remaining = std::max<int64_t>(count - total, 0);
  return MakeDecision(
      limit, allowed, remaining,
      {.retry_after = allowed ? 0 : wait_for(total + units - count),
       .reset_after = first_live() == log.end() ? 0 : log.back().at + period - now,
       .replenish_after = remaining < count ? wait_for(total + remaining + 1 - count) : 0});
}

Decision Decide(const Limit& limit, SlidingWindowState& s, int64_t now, int64_t cost) {
  const int64_t period = limit.period().count();
  const int64_t count = limit.count();
  // A state whose latest admission is in a window later than now's (the clock went back) is
  // decided as at that window's start, where its previous window still weighs in full.
  const int64_t at = std::max(now, WindowStart(s.latest, period));
  const int64_t lag = at - now;
  const int64_t start = WindowStart(at, period);
  // Each count goes to the window, in this period, of the latest time its units may have come:
  // with the period unchanged, `current` stays or becomes `previous`, and `previous` stays or
  // goes; after a change no unit is counted earlier than it may have come.
  int64_t previous = 0, current = 0;
  const auto place = [&](int64_t latest_possible, int64_t units) {
    if (units == 0) return;
    const int64_t window = WindowStart(latest_possible, period);
    if (window == start) {
      current += units;
    } else if (window == start - period) {
      previous += units;
    }
  };
  place(s.latest, s.current);
  place(s.window_start - 1, s.previous);

  const int64_t elapsed = at - start;
  const int64_t units = UnitsJudged(cost);
  const bool allowed = SlidingAdmits(previous, current, elapsed, period, units, count);
  if (allowed && cost > 0) {
    current += cost;
    s = {.window_start = start,
         .latest = std::max(now, s.latest),
         .previous = previous,
         .current = current};
  }
  const double left =
      static_cast<double>(count) - SlidingEstimate(previous, current, elapsed, period);
  const int64_t remaining = std::max<int64_t>(static_cast<int64_t>(std::floor(left)), 0);
  const int64_t reset_after = current > 0    ? 2 * period - elapsed + lag
                              : previous > 0 ? period - elapsed + lag
                                             : 0;
  return MakeDecision(
      limit, allowed, remaining,
      {.retry_after =
           allowed ? 0 : SlidingWait(previous, current, elapsed, period, units, count) + lag,
       .reset_after = reset_after,
       .replenish_after =
           remaining < count
               ? SlidingWait(previous, current, elapsed, period, remaining + 1, count) + lag
               : 0});
}

Decision Decide(const Limit& limit, TokenBucketState& s, int64_t now, int64_t cost,
                int64_t max_delay) {
  return OnBucket(limit, s, [&](Bucket& b) { return Decide(limit, b, now, cost, max_delay); });
}

Decision Decide(const Limit& limit, LeakyBucketState& s, int64_t now, int64_t cost,
                int64_t max_delay) {
  return OnBucket(limit, s, [&](Bucket& b) { return Decide(limit, b, now, cost, max_delay); });
}

Decision Decide(const Limit& limit, GcraState& s, int64_t now, int64_t cost, int64_t max_delay) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  const int64_t tolerance = capacity * interval;
  // A TAT beyond now + tolerance (booked ahead, or a burst lowered since) admits nothing until
  // the clock reaches TAT - tolerance.
  int64_t tat = std::max(s.theoretical_arrival, now);
  const auto wait_for = [&](int64_t units) { return tat + units * interval - tolerance - now; };
  const int64_t units = UnitsJudged(cost);
  const MeterAnswer answer = Meter(wait_for(units) <= 0, wait_for(units), cost, max_delay);
  if (answer.allowed && cost > 0) {
    tat += cost * interval;
    s.theoretical_arrival = tat;
  }
  // Less than an interval of room (a key at its limit) needs no division.
  const int64_t room = now + tolerance - tat;
  const int64_t remaining = room >= interval ? room / interval : 0;
  return MakeDecision(limit, answer.allowed, remaining,
                      {.retry_after = answer.retry_after,
                       .reset_after = tat - now,
                       .replenish_after = remaining < capacity ? wait_for(remaining + 1) : 0,
                       .delay = answer.delay});
}

int64_t GiveBack(const Limit& limit, TokenBucketState& s, int64_t now, int64_t units) {
  return OnBucket(limit, s, [&](Bucket& b) { return GiveBack(limit, b, now, units); });
}

int64_t GiveBack(const Limit& limit, LeakyBucketState& s, int64_t now, int64_t units) {
  return OnBucket(limit, s, [&](Bucket& b) { return GiveBack(limit, b, now, units); });
}

int64_t GiveBack(const Limit& limit, GcraState& s, int64_t now, int64_t units) {
  const int64_t interval = limit.emission_interval().count();
  s.theoretical_arrival = std::max(std::max(s.theoretical_arrival, now) - units * interval, now);
  return s.theoretical_arrival - now;
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
  if (state.index() != static_cast<size_t>(limit.algorithm()) ||
      !std::visit([&](const auto& s) { return InRange(limit, s, now); }, state)) {
    state = FreshState(limit, now);
  }
  return std::visit([&](auto& s) { return DecideOn(limit, s, now, cost, max_delay); }, state);
}

}  // namespace sluice::core
