#include "http/rate_limit_headers.h"

#include <fmt/format.h>

#include <algorithm>

namespace sluice::http {
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

// The quota is capacity() because that is what `remaining` counts down from: the count would
// show r=49 against q=10 for 10/s with a burst of 50. A spent capacity refills at count/period.
// The window is rounded up (100/min with a burst of 7: q=7;w=5), so the advertised rate q/w is
// never above the real one.
std::string RateLimitPolicyValue(std::string_view policy_name, const Limit& limit) {
  // capacity × period can exceed 64 bits (a billion units over 366 days).
  const auto capacity_us = static_cast<__int128>(limit.capacity()) * limit.period().count();
  const auto count_us_per_second = static_cast<__int128>(limit.count()) * 1'000'000;
  const auto window_seconds =
      static_cast<int64_t>((capacity_us + count_us_per_second - 1) / count_us_per_second);
  std::string out;
  AppendSfString(out, policy_name);
  fmt::format_to(std::back_inserter(out), ";q={};w={}", limit.capacity(), window_seconds);
  return out;
}

std::string RateLimitValue(std::string_view policy_name, const Decision& decision) {
  std::string out;
  AppendSfString(out, policy_name);
  fmt::format_to(std::back_inserter(out), ";r={};t={}", decision.remaining,
                 CeilSeconds(decision.reset_after));
  return out;
}

std::string RetryAfterValue(const Decision& decision) {
  if (decision.allowed) return {};
  return std::to_string(CeilSeconds(decision.retry_after));
}

RateLimitHeaders FormatRateLimitHeaders(std::string_view policy_name, const Limit& limit,
                                        const Decision& decision) {
  return {RateLimitPolicyValue(policy_name, limit), RateLimitValue(policy_name, decision),
          RetryAfterValue(decision)};
}

}  // namespace sluice::http
