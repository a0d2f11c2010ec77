#include "sluice/middleware/middleware.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>

#include "base/hashed_key.h"
#include "middleware/forwarded_for.h"
#include "middleware/rate_limit_headers.h"
#include "middleware/refusal.h"
#include "middleware/request_path.h"

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
constexpr std::string_view kUnavailableBody = R"({"error":"rate limiter unavailable"})";
constexpr std::string_view kFailedBody = R"({"error":"rate limiter failed"})";

// The key of a client at `address`, by its network under `prefixes`.
std::string ClientKey(const ip::address& address, const ClientPrefixes& prefixes) {
  if (address.is_v4()) {
    if (prefixes.ipv4() == 32) return address.to_string();
    return ip::network_v4(address.to_v4(), prefixes.ipv4()).canonical().to_string();
  }
  if (prefixes.ipv6() == 128) return address.to_string();
  return ip::network_v6(address.to_v6(), prefixes.ipv6()).canonical().to_string();
}

// Appends one part of a composed key so that the parts can be told apart (see Compose).
void AppendPart(std::string& key, const std::optional<std::string>& part) {
  if (!part) {
    key += kAnonymous;
    return;
  }
  if (*part == kAnonymous) key += '\\';
  for (const char c : *part) {
    if (c == '|' || c == '\\') key += '\\';
    key += c;
  }
}

}  // namespace

std::optional<std::string_view> RequestView::header(std::string_view name) const {
  std::optional<std::string_view> first;
  ForEachHeaderValue(name, [&first](std::string_view value) {
    if (!first) first = value;
  });
  return first;
}

struct TrustedProxies::Networks {
  std::vector<ip::network_v4> v4;
  std::vector<ip::network_v6> v6;

  bool Contains(const ip::address& address) const {
    if (address.is_v4()) {
      return std::any_of(v4.begin(), v4.end(), [&address](const ip::network_v4& block) {
        return ip::network_v4(address.to_v4(), block.prefix_length()).canonical() == block;
      });
    }
    return std::any_of(v6.begin(), v6.end(), [&address](const ip::network_v6& block) {
      return ip::network_v6(address.to_v6(), block.prefix_length()).canonical() == block;
    });
  }
};

TrustedProxies::TrustedProxies() : networks_(std::make_shared<Networks>()) {}

Result<ClientPrefixes> ClientPrefixes::Create(int ipv4, int ipv6) {
  if (ipv4 < 0 || ipv4 > 32 || ipv6 < 0 || ipv6 > 128) {
    return Status::InvalidArgument(
        "client prefixes go from /0 to /32 (IPv4) and /128 (IPv6), got /" + std::to_string(ipv4) +
        " and /" + std::to_string(ipv6));
  }
  ClientPrefixes prefixes;
  prefixes.ipv4_ = ipv4;
  prefixes.ipv6_ = ipv6;
  return prefixes;
}

std::optional<std::string> ClientPrefixes::KeyOf(std::string_view address) const {
  const auto parsed = ParseAddress(address);
  if (!parsed) return std::nullopt;
  return ClientKey(*parsed, *this);
}

Result<TrustedProxies> TrustedProxies::Parse(const std::vector<std::string>& cidrs) {
  // ::ffff:0:0/96 holds the IPv4-mapped addresses.
  constexpr int kMappedPrefix = 96;
  auto networks = std::make_shared<Networks>();
  for (const auto& text : cidrs) {
    boost::system::error_code ec;
    const std::string cidr = text.find('/') == std::string::npos
                                 ? text + (text.find(':') == std::string::npos ? "/32" : "/128")
                                 : text;
    if (const ip::network_v4 v4 = ip::make_network_v4(cidr, ec); !ec) {
      networks->v4.push_back(v4.canonical());
      continue;
    }
    const ip::network_v6 v6 = ip::make_network_v6(cidr, ec);
    if (ec) {
      return Status::InvalidArgument("bad trusted proxy '" + text +
                                     "': expected an address or a CIDR block like 10.0.0.0/8");
    }
    // Addresses are matched unmapped, so a mapped block is matched as the IPv4 block it maps.
    if (v6.address().is_v4_mapped() && v6.prefix_length() >= kMappedPrefix) {
      networks->v4.push_back(ip::network_v4(ip::make_address_v4(ip::v4_mapped, v6.address()),
                                            v6.prefix_length() - kMappedPrefix)
                                 .canonical());
    } else {
      networks->v6.push_back(v6.canonical());
    }
  }
  TrustedProxies trusted;
  trusted.networks_ = std::move(networks);
  return trusted;
}

bool TrustedProxies::Contains(std::string_view address) const {
  const auto parsed = ParseAddress(address);
  return parsed && networks_->Contains(*parsed);
}

KeyExtractor ClientIp(TrustedProxies trusted, ClientPrefixes prefixes) {
  return [trusted, prefixes](const RequestView& r) -> std::optional<std::string> {
    const auto peer = ParseAddress(r.peer_address());
    if (!peer) return std::string(r.peer_address());
    ip::address client = *peer;
    if (!trusted.networks_->Contains(client)) return ClientKey(client, prefixes);
    const std::vector<std::string_view> hops = ForwardedForEntries(r);
    for (auto hop = hops.rbegin(); hop != hops.rend(); ++hop) {
      const auto address = ParseAddress(*hop);
      if (!address) break;
      client = *address;
      if (!trusted.networks_->Contains(client)) break;
    }
    return ClientKey(client, prefixes);
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
  return [](const RequestView& r) -> std::optional<std::string> {
    Result<std::string> path = NormalPath(r.path());
    if (!path.ok()) return std::nullopt;
    return std::move(*path);
  };
}

KeyExtractor Compose(std::vector<KeyExtractor> parts) {
  return [parts = std::move(parts)](const RequestView& r) -> std::optional<std::string> {
    std::string key;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) key += '|';
      AppendPart(key, parts[i](r));
    }
    return key;
  };
}

RateLimiter::RateLimiter(Limiter& limiter, KeyExtractor key, std::string policy_name,
                         RateLimiterOptions options, Duration max_delay)
    : limiter_(limiter),
      key_(std::move(key)),
      policy_name_(std::move(policy_name)),
      policy_header_(RateLimitPolicyValue(policy_name_, limiter.limit())),
      cost_(options.cost),
      max_delay_(max_delay),
      shadow_mode_(options.shadow_mode),
      on_shadow_decision_(std::move(options.on_shadow_decision)) {}

Result<std::string> StoredKey(std::string key) {
  std::optional<std::string> stored = base::StoredKey(std::move(key), kMaxKeyBytes);
  if (!stored) return Status::Internal("libcrypto could not compute a SHA-256");
  return std::move(*stored);
}

Result<std::string> RateLimiter::KeyOf(const RequestView& request) const {
  std::string key = key_(request).value_or(std::string(kAnonymous));
  if (key.empty()) return std::string(kAnonymous);
  return StoredKey(std::move(key));
}

Result<RateLimiter> RateLimiter::Create(Limiter& limiter, KeyExtractor key, std::string policy_name,
                                        RateLimiterOptions options) {
  if (!key) return Status::InvalidArgument("a rate limiter needs a key extractor");
  if (options.cost < 0 || options.delay < 0) {
    return Status::InvalidArgument("cost and delay must not be negative");
  }
  if (options.shadow_mode && options.delay > 0) {
    return Status::InvalidArgument("shadow mode holds nothing back: it takes no delay");
  }
  // Whatever a check would be refused for, whatever the request: the limiter's name, the cost.
  if (Status s = ValidateCheck(limiter.Request(kAnonymous, options.cost)); !s.ok()) return s;
  const Limit& limit = limiter.limit();
  Duration max_delay{0};
  if (options.delay > 0) {
    if (!IsMeter(limit.algorithm())) {
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
    max_delay = limit.emission_interval() * options.delay * options.cost;
  }
  return RateLimiter(limiter, std::move(key), std::move(policy_name), std::move(options),
                     max_delay);
}

Verdict RateLimiter::ToVerdict(const Result<Decision>& decision) const {
  if (!decision.ok()) return Undecided(decision.status());
  Verdict verdict;
  verdict.degraded = decision->degraded();
  verdict.headers.emplace_back("RateLimit-Policy", policy_header_);
  verdict.headers.emplace_back("RateLimit", RateLimitValue(policy_name_, *decision));
  if (shadow_mode_) {
    if (on_shadow_decision_) on_shadow_decision_(*decision);
    verdict.would_deny = !decision->allowed;
    return verdict;
  }
  if (decision->allowed) {
    if (max_delay_.count() > 0) {
      verdict.delay = decision->delay;
      verdict.headers.emplace_back("Server-Timing", ServerTimingValue(decision->delay));
    }
    return verdict;
  }
  verdict.allowed = false;
  verdict.status = 429;
  verdict.headers.emplace_back("Retry-After", RetryAfterValue(*decision));
  verdict.body = kDeniedBody;
  return verdict;
}

// A ResilientStore has decided an outage by the failure policy before it gets here; on another
// store the policy is applied here, where fail_open is the only one that can decide without a
// local limiter.
Verdict RateLimiter::Undecided(Status error) const {
  Verdict verdict;
  verdict.degraded = IsStoreOutage(error);
  verdict.error = std::move(error);
  if (verdict.degraded && limiter_.on_error() == FailurePolicy::kFailOpen) return verdict;
  const Refusal refusal = RefusalOf(verdict.error);
  verdict.allowed = false;
  verdict.status = refusal.status;
  if (!refusal.retry_after.empty()) {
    verdict.headers.emplace_back("Retry-After", refusal.retry_after);
  }
  verdict.body = refusal.status == 500 ? kFailedBody : kUnavailableBody;
  return verdict;
}

Verdict RateLimiter::Check(const RequestView& request) const {
  const Result<std::string> key = KeyOf(request);
  if (!key.ok()) return Undecided(key.status());
  return ToVerdict(limiter_.Reserve(*key, cost_, max_delay_));
}

void RateLimiter::CheckAsync(const RequestView& request, std::function<void(Verdict)> done) const {
  const Result<std::string> key = KeyOf(request);
  if (!key.ok()) return done(Undecided(key.status()));
  limiter_.ReserveAsync(*key, cost_, max_delay_, [this, done = std::move(done)](auto decision) {
    done(ToVerdict(decision));
  });
}

}  // namespace sluice::middleware
