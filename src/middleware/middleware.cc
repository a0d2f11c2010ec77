#include "sluice/middleware/middleware.h"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>

#include "http/rate_limit_headers.h"

namespace sluice::middleware {
namespace {

namespace ip = boost::asio::ip;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr std::string_view kAnonymous = "-";
constexpr std::string_view kDeniedBody = R"({"error":"rate limit exceeded"})";

}  // namespace

struct TrustedProxies::Network {
  std::optional<ip::network_v4> v4;
  std::optional<ip::network_v6> v6;
};

Result<TrustedProxies> TrustedProxies::Parse(const std::vector<std::string>& cidrs) {
  TrustedProxies trusted;
  for (const auto& text : cidrs) {
    auto network = std::make_shared<Network>();
    boost::system::error_code ec;
    const std::string cidr = text.find('/') == std::string::npos
                                 ? text + (text.find(':') == std::string::npos ? "/32" : "/128")
                                 : text;
    network->v4 = ip::make_network_v4(cidr, ec);
    if (ec) {
      network->v4.reset();
      network->v6 = ip::make_network_v6(cidr, ec);
    }
    if (ec) {
      return Status::InvalidArgument("bad trusted proxy '" + text +
                                     "': expected an address or a CIDR block like 10.0.0.0/8");
    }
    trusted.networks_.push_back(std::move(network));
  }
  return trusted;
}

bool TrustedProxies::Contains(std::string_view address) const {
  boost::system::error_code ec;
  const ip::address parsed = ip::make_address(std::string(address), ec);
  if (ec) return false;
  for (const auto& n : networks_) {
    if (n->v4 && parsed.is_v4()) {
      const ip::network_v4 host(parsed.to_v4(), 32);
      if (host.canonical() == n->v4->canonical() || host.is_subnet_of(*n->v4)) return true;
    }
    if (n->v6 && parsed.is_v6()) {
      const ip::network_v6 host(parsed.to_v6(), 128);
      if (host.canonical() == n->v6->canonical() || host.is_subnet_of(*n->v6)) return true;
    }
  }
  return false;
}

KeyExtractor ClientIp(TrustedProxies trusted) {
  return [trusted = std::move(trusted)](const RequestView& r) -> std::optional<std::string> {
    std::string_view client = r.peer_address();
    if (!trusted.Contains(client)) return std::string(client);
    auto forwarded = r.header("X-Forwarded-For");
    if (!forwarded) return std::string(client);
    // Right to left: each hop appended the address it saw; skip our own proxies.
    std::string_view rest = *forwarded;
    while (!rest.empty()) {
      const auto comma = rest.rfind(',');
      const std::string_view hop =
          Trim(comma == std::string_view::npos ? rest : rest.substr(comma + 1));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
      if (hop.empty()) continue;
      client = hop;
      if (!trusted.Contains(hop)) break;
    }
    return std::string(client);
  };
}

KeyExtractor Header(std::string name) {
  return [name = std::move(name)](const RequestView& r) -> std::optional<std::string> {
    auto value = r.header(name);
    if (!value || Trim(*value).empty()) return std::nullopt;
    return std::string(Trim(*value));
  };
}

KeyExtractor Path() {
  return [](const RequestView& r) -> std::optional<std::string> { return std::string(r.path()); };
}

KeyExtractor Compose(std::vector<KeyExtractor> parts) {
  return [parts = std::move(parts)](const RequestView& r) -> std::optional<std::string> {
    std::string key;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) key += '|';
      key += parts[i](r).value_or(std::string(kAnonymous));
    }
    return key;
  };
}

RateLimiter::RateLimiter(Limiter& limiter, KeyExtractor key, std::string policy_name, int64_t cost)
    : limiter_(limiter),
      key_(std::move(key)),
      policy_name_(std::move(policy_name)),
      policy_header_(http::RateLimitPolicyValue(policy_name_, limiter.limit())),
      cost_(cost) {}

std::string RateLimiter::KeyOf(const RequestView& request) const {
  std::string key = key_(request).value_or(std::string(kAnonymous));
  if (key.empty()) key = kAnonymous;
  if (key.size() > kMaxKeyBytes) key.resize(kMaxKeyBytes);
  return key;
}

Result<RateLimiter> RateLimiter::Create(Limiter& limiter, KeyExtractor key, std::string policy_name,
                                        RateLimiterOptions options) {
  if (options.cost < 0 || options.delay < 0) {
    return Status::InvalidArgument("cost and delay must not be negative");
  }
  RateLimiter rate_limiter(limiter, std::move(key), std::move(policy_name), options.cost);
  if (options.delay == 0) return rate_limiter;
  const Limit& limit = limiter.limit();
  if (!CanReserve(limit.algorithm())) {
    return Status::InvalidArgument("delay needs token_bucket, leaky_bucket or gcra, not " +
                                   std::string(AlgorithmName(limit.algorithm())));
  }
  // The delay-th request past the burst waits at most delay × cost emission intervals.
  const Duration most = MaxDelayOf(limit);
  const int64_t intervals = most / limit.emission_interval();
  if (options.cost > 0 && options.delay > intervals / options.cost) {
    return Status::InvalidArgument("delay " + std::to_string(options.delay) +
                                   " would hold requests longer than " +
                                   std::to_string(most.count()) + "us");
  }
  rate_limiter.max_delay_ = limit.emission_interval() * options.delay * options.cost;
  return rate_limiter;
}

Verdict RateLimiter::ToVerdict(const Result<Decision>& decision) const {
  Verdict verdict;
  if (!decision.ok()) return verdict;
  verdict.headers.emplace_back("RateLimit-Policy", policy_header_);
  verdict.headers.emplace_back("RateLimit", http::RateLimitValue(policy_name_, *decision));
  if (decision->allowed) {
    if (max_delay_.count() > 0) {
      verdict.delay = decision->delay;
      verdict.headers.emplace_back("Server-Timing", http::ServerTimingValue(decision->delay));
    }
    return verdict;
  }
  verdict.allowed = false;
  verdict.status = 429;
  verdict.headers.emplace_back("Retry-After", http::RetryAfterValue(*decision));
  verdict.body = kDeniedBody;
  return verdict;
}

Verdict RateLimiter::Check(const RequestView& request) const {
  return ToVerdict(limiter_.Reserve(KeyOf(request), cost_, max_delay_));
}

void RateLimiter::CheckAsync(const RequestView& request, std::function<void(Verdict)> done) const {
  limiter_.ReserveAsync(
      KeyOf(request), cost_, max_delay_,
      [this, done = std::move(done)](auto decision) { done(ToVerdict(decision)); });
}

}  // namespace sluice::middleware
