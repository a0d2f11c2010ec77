// Rate limiting for the HTTP servers of a C++ service, framework-independent: a RateLimiter
// turns a request into a key (client IP, a header, the path, or a composition of these),
// checks it against a Limiter, and says what to answer: on deny, 429 with a JSON error and the
// Retry-After, RateLimit and RateLimit-Policy headers; on allow, the RateLimit headers to add to
// the response. Adapters for Boost.Beast and cpp-httplib are in beast.h and httplib.h beside
// this file.
//
// Shaping (RateLimiterOptions::delay, like nginx `limit_req burst=N` without `nodelay`): up to
// `delay` requests beyond what the limit admits at once are not refused but held until their
// turn at the configured rate, each booking its slot in the store (Limiter::Reserve), so the
// order and the spacing hold across every instance sharing the store; the rest get 429. The
// verdict says how long to hold the request, and carries `Server-Timing: ratelimit;dur=<ms>`.
//
// Thread safety: a RateLimiter and the extractors are immutable once built; all methods may be
// called concurrently. The Limiter must outlive the RateLimiter.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/status.h"

namespace sluice::middleware {

// What an extractor can see of a request; each adapter implements it over its framework.
class RequestView {
 public:
  virtual ~RequestView() = default;
  // The address of the TCP peer, without port ("203.0.113.7", "::1").
  virtual std::string_view peer_address() const = 0;
  // The path, without the query string.
  virtual std::string_view path() const = 0;
  // A header's value; nullopt when absent. Names are case-insensitive.
  virtual std::optional<std::string_view> header(std::string_view name) const = 0;
};

// Makes a request's key. Returns nullopt when the request has nothing to key on (a missing
// header): such requests share the key "-".
using KeyExtractor = std::function<std::optional<std::string>(const RequestView&)>;

// Addresses of the reverse proxies whose X-Forwarded-For is believed: CIDR blocks
// ("10.0.0.0/8", "::1/128") or single addresses.
class TrustedProxies {
 public:
  static Result<TrustedProxies> Parse(const std::vector<std::string>& cidrs);
  bool Contains(std::string_view address) const;

 private:
  struct Network;
  std::vector<std::shared_ptr<const Network>> networks_;
};

// The client's IP: the peer address, unless the peer is a trusted proxy; then the right-most
// address of X-Forwarded-For that is not a trusted proxy (clients can forge the left part).
KeyExtractor ClientIp(TrustedProxies trusted = {});
// The value of a header (an API key, a user id).
KeyExtractor Header(std::string name);
// The request path.
KeyExtractor Path();
// Several keys joined with '|', e.g. Compose({ClientIp(), Path()}) limits each client per path.
KeyExtractor Compose(std::vector<KeyExtractor> parts);

// The answer for one request.
struct Verdict {
  bool allowed = true;
  int status = 200;  // 429 when denied
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // the JSON error when denied (Content-Type: application/json)
  // Shaping: how long to hold the request before handling it (its booked slot); the adapters
  // wait it out. Zero otherwise.
  Duration delay{0};
};

struct RateLimiterOptions {
  // Units each request costs.
  int64_t cost = 1;
  // Requests beyond the limit's burst delayed to the rate instead of refused (see above); 0
  // refuses all excess. Needs token_bucket, leaky_bucket or gcra.
  int64_t delay = 0;
};

class RateLimiter {
 public:
  // `policy_name` names the policy in the RateLimit headers.
  RateLimiter(Limiter& limiter, KeyExtractor key, std::string policy_name, int64_t cost = 1);
  // INVALID_ARGUMENT for a negative cost or delay, a delay on an algorithm that cannot book
  // slots, or a delay whose wait would exceed MaxDelayOf(limit).
  static Result<RateLimiter> Create(Limiter& limiter, KeyExtractor key, std::string policy_name,
                                    RateLimiterOptions options);

  // A store error (when the store is not a ResilientStore, which decides by policy instead)
  // lets the request through without headers: the limiter must not become the outage.
  Verdict Check(const RequestView& request) const;
  void CheckAsync(const RequestView& request, std::function<void(Verdict)> done) const;

 private:
  std::string KeyOf(const RequestView& request) const;
  Verdict ToVerdict(const Result<Decision>& decision) const;

  Limiter& limiter_;
  KeyExtractor key_;
  std::string policy_name_;
  std::string policy_header_;
  int64_t cost_;
  Duration max_delay_{0};  // shaping when above zero
};

}  // namespace sluice::middleware
