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

// token_bucket's state refilled to `now`, as a check sees it.
TokenBucketState Refilled(const Limit& limit, const TokenBucketState& s, int64_t now) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  if (s.tokens >= capacity) {
    // Full, or above a burst lowered since: the capacity, whose refill starts now.
    return {.tokens = capacity, .refilled_at = now};
  }
  if (now <= s.refilled_at) return s;
  const int64_t earned = (now - s.refilled_at) / interval;
  const int64_t tokens = std::min(capacity, s.tokens + earned);
  return {.tokens = tokens,
          .refilled_at = tokens == capacity ? now : s.refilled_at + earned * interval};
}

// leaky_bucket's state drained to `now`, as a check sees it.
LeakyBucketState Drained(const Limit& limit, const LeakyBucketState& s, int64_t now) {
  if (s.level == 0) return {.level = 0, .drained_at = now};
  if (now <= s.drained_at) return s;
  const int64_t interval = limit.emission_interval().count();
  const int64_t leaked = (now - s.drained_at) / interval;
  const int64_t level = std::max<int64_t>(0, s.level - leaked);
  return {.level = level, .drained_at = level == 0 ? now : s.drained_at + leaked * interval};
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
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  const TokenBucketState refilled = Refilled(limit, s, now);
  int64_t tokens = refilled.tokens;
  const int64_t refilled_at = refilled.refilled_at;
  // Negative when the clock is behind refilled_at: the next token is that much further.
  const int64_t into_next_token = now - refilled_at;
  const auto wait_for = [&](int64_t units) {
    return (units - tokens) * interval - into_next_token;
  };
  const int64_t units = UnitsJudged(cost);
  const MeterAnswer answer = Meter(tokens >= units, wait_for(units), cost, max_delay);
  if (answer.allowed && cost > 0) {
    tokens -= cost;
    s = {.tokens = tokens, .refilled_at = refilled_at};
  }
  const int64_t remaining = std::max<int64_t>(tokens, 0);
  return MakeDecision(limit, answer.allowed, remaining,
                      {.retry_after = answer.retry_after,
                       .reset_after = wait_for(capacity),
                       .replenish_after = remaining < capacity ? wait_for(remaining + 1) : 0,
                       .delay = answer.delay});
}

Decision Decide(const Limit& limit, LeakyBucketState& s, int64_t now, int64_t cost,
                int64_t max_delay) {
  const int64_t interval = limit.emission_interval().count();
  const int64_t capacity = limit.capacity();
  const LeakyBucketState drained = Drained(limit, s, now);
  int64_t level = drained.level;
  const int64_t drained_at = drained.drained_at;
  // Negative when the clock is behind drained_at: the next drop is that much further. A level
  // above the capacity (a burst lowered since) drains before anything fits.
  const int64_t into_next_drop = now - drained_at;
  const auto wait_for = [&](int64_t units) {
    return (level + units - capacity) * interval - into_next_drop;
  };
  const int64_t units = UnitsJudged(cost);
  const MeterAnswer answer = Meter(level + units <= capacity, wait_for(units), cost, max_delay);
  if (answer.allowed && cost > 0) {
    level += cost;
    s = {.level = level, .drained_at = drained_at};
  }
  const int64_t remaining = std::max<int64_t>(capacity - level, 0);
  return MakeDecision(limit, answer.allowed, remaining,
                      {.retry_after = answer.retry_after,
                       .reset_after = wait_for(capacity),
                       .replenish_after = remaining < capacity ? wait_for(remaining + 1) : 0,
                       .delay = answer.delay});
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
  const int64_t capacity = limit.capacity();
  s = Refilled(limit, s, now);
  s.tokens = std::min(capacity, s.tokens + units);
  if (s.tokens == capacity) s.refilled_at = now;  // as a refill to full
  return std::max<int64_t>(
      (capacity - s.tokens) * limit.emission_interval().count() - (now - s.refilled_at), 0);
}

int64_t GiveBack(const Limit& limit, LeakyBucketState& s, int64_t now, int64_t units) {
  s = Drained(limit, s, now);
  s.level = std::max<int64_t>(0, s.level - units);
  if (s.level == 0) s.drained_at = now;
  return std::max<int64_t>(s.level * limit.emission_interval().count() - (now - s.drained_at), 0);
}

int64_t GiveBack(const Limit& limit, GcraState& s, int64_t now, int64_t units) {
  const int64_t interval = limit.emission_interval().count();
  s.theoretical_arrival = std::max(std::max(s.theoretical_arrival, now) - units * interval, now);
  return s.theoretical_arrival - now;
}

namespace {

bool IsTime(int64_t t, int64_t now) { return t >= 0 && t <= now + kMaxStateAhead; }
bool IsCount(int64_t n, int64_t most = Limit::kMaxCount) { return n >= 0 && n <= most; }

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
