#include "middleware/rate_limit_headers.h"

#include <fmt/format.h>

#include <algorithm>

namespace sluice::middleware {
namespace {

// An sf-string (RFC 9651 section 3.3.3) holds printable ASCII only, with '"' and '\' escaped;
// any other byte cannot be represented and is replaced by '?'.
void AppendSfString(std::string& out, std::string_view text) {
  out.push_back('"');
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c >= 0x20 && c <= 0x7e) {
      out.push_back(c);
    } else {
      out.push_back('?');
    }
  }
  out.push_back('"');
}

}  // namespace

int64_t CeilSeconds(Duration d) {
  constexpr int64_t kMicrosPerSecond = 1'000'000;
  return d.count() <= 0 ? 0 : (d.count() + kMicrosPerSecond - 1) / kMicrosPerSecond;
}

std::string ServerTimingValue(Duration waited) {
  const int64_t us = std::max<int64_t>(waited.count(), 0);
  return fmt::format("ratelimit;dur={}.{:03}", us / 1000, us % 1000);
}

// The window is what a spent capacity takes to refill at count/period, rounded up to whole
// seconds; the quota is what refills in that window, rounded down. So r, which counts down from
// capacity(), never exceeds q (q >= capacity), and the advertised rate q/w is never above the
// real one: 100/min with a burst of 20 gives q=20;w=12; 10/s with a burst of 1 gives q=10;w=1
// (not q=1;w=1, which would advertise a tenth of the rate).
std::string RateLimitPolicyValue(std::string_view policy_name, const Limit& limit) {
  // capacity × period can exceed 64 bits (a billion units over 366 days).
  using Wide = __int128;
  constexpr Wide kMicrosPerSecond = 1'000'000;
  const Wide period_us = limit.period().count();
  const Wide capacity_us = static_cast<Wide>(limit.capacity()) * period_us;
  const Wide count_us_per_second = static_cast<Wide>(limit.count()) * kMicrosPerSecond;
  const Wide window_seconds = (capacity_us + count_us_per_second - 1) / count_us_per_second;
  const Wide quota = window_seconds * kMicrosPerSecond * limit.count() / period_us;
  std::string out;
  AppendSfString(out, policy_name);
  fmt::format_to(std::back_inserter(out), ";q={};w={}", static_cast<int64_t>(quota),
                 static_cast<int64_t>(window_seconds));
  return out;
}

std::string RateLimitValue(std::string_view policy_name, const Decision& decision) {
  std::string out;
  AppendSfString(out, policy_name);
  fmt::format_to(std::back_inserter(out), ";r={};t={}", decision.remaining,
                 CeilSeconds(decision.replenish_after));
  return out;
}

std::string RetryAfterValue(const Decision& decision) {
  if (decision.allowed) return {};
  return std::to_string(CeilSeconds(std::max(decision.retry_after, decision.replenish_after)));
}

}  // namespace sluice::middleware
