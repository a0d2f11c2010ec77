// Rate limiting for the HTTP servers of a C++ service, framework-independent: a RateLimiter
// turns a request into a key (client IP, a header, the path, or a composition of these),
// checks it against a Limiter, and says what to answer: on deny, 429 with a JSON error and the
// Retry-After, RateLimit and RateLimit-Policy headers; on allow, the RateLimit headers to add to
// the response. Adapters for Boost.Beast and cpp-httplib are in beast.h and httplib.h beside
// this file.
//
// A check the store cannot decide is never admitted silently. A store outage (IsStoreOutage:
// unreachable, or no answer within its deadline) is for the Limiter's failure policy: behind a
// ResilientStore, the policy decides as it does for any caller; on another store, fail_open
// admits (Verdict::degraded) and fail_closed and local_fallback (which needs a ResilientStore's
// local limiter) refuse with 503. Any other error is refused: 503 with Retry-After for a full
// store (RESOURCE_EXHAUSTED: a MemoryStore that cannot make room for a new key), 500 for a
// fault (INTERNAL). Verdict::error says why, for the application's logs.
//
// Shaping (RateLimiterOptions::delay, like nginx `limit_req burst=N` without `nodelay`): up to
// `delay` requests beyond what the limit admits at once are not refused but held until their
// turn at the configured rate, each booking its slot in the store (Limiter::Reserve), so the
// order and the spacing hold across every instance sharing the store; the rest get 429. The
// verdict says how long to hold the request, and carries `Server-Timing: ratelimit;dur=<ms>`.
//
// Shadow mode (RateLimiterOptions::shadow_mode), to try a limit on real traffic before it denies
// anything: every request is checked and counted in the store as usual, and admitted whatever the
// limit says; the verdict carries the RateLimit headers as decided, no Retry-After, and
// Verdict::would_deny; RateLimiterOptions::on_shadow_decision, when set, sees each decision. A
// check the store could not decide is answered as above, shadow mode or not.
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
  // The request target's path as the client sent it, still percent-encoded (the query string
  // may be left on: Path() drops it).
  virtual std::string_view path() const = 0;
  // Calls `visit` with the value of every field line named `name` (case-insensitive), in the
  // order received: a header may come in several lines, which together are one comma-separated
  // list (RFC 9110 section 5.3).
  virtual void ForEachHeaderValue(std::string_view name,
                                  const std::function<void(std::string_view)>& visit) const = 0;
  // The value of the first line named `name`; nullopt when absent.
  std::optional<std::string_view> header(std::string_view name) const;
};

// Makes a request's key. Returns nullopt when the request has nothing to key on (a missing
// header): such requests share the key "-". A key above kMaxKeyBytes, or one that starts with
// "sha256:", is replaced by "sha256:" and the SHA-256 of the key in hex: never truncated, so two
// keys share a limit only if they are equal (or collide in SHA-256).
using KeyExtractor = std::function<std::optional<std::string>(const RequestView&)>;

// How much of a client's address is its key: the network of its `ipv4` leading bits for IPv4
// (32 by default: the address) and of its `ipv6` leading bits for IPv6 (64 by default). An IPv6
// host is commonly given a whole /64 (SLAAC, privacy addresses) and can send each request from a
// fresh address in it: keyed by its full address, it would get a fresh limit each time.
class ClientPrefixes {
 public:
  ClientPrefixes() = default;  // /32 and /64
  // INVALID_ARGUMENT unless 0 <= ipv4 <= 32 and 0 <= ipv6 <= 128.
  static Result<ClientPrefixes> Create(int ipv4, int ipv6);

  int ipv4() const { return ipv4_; }
  int ipv6() const { return ipv6_; }
  // The key of the client at `address` (an IP, optionally with a port, as ClientIp reads them;
  // an IPv4-mapped IPv6 address is the IPv4 one): the address in its canonical form when the
  // prefix covers all of it ("192.0.2.1", "2001:db8::1" under /128), else its network in CIDR
  // form ("2001:db8:1:2::/64", "192.0.2.0/24"). nullopt when `address` is not an IP address.
  std::optional<std::string> KeyOf(std::string_view address) const;

 private:
  int ipv4_ = 32;
  int ipv6_ = 64;
};

// Addresses of the reverse proxies whose X-Forwarded-For is believed: CIDR blocks
// ("10.0.0.0/8", "::1/128") or single addresses. IPv4-mapped IPv6 addresses and blocks
// ("::ffff:10.0.0.0/104") are taken as the IPv4 ones they map.
class TrustedProxies {
 public:
  TrustedProxies();  // trusts no one
  // Copies share the parsed blocks; a move is a copy, so no object is ever left without them.
  TrustedProxies(const TrustedProxies&) = default;
  TrustedProxies& operator=(const TrustedProxies&) = default;
  static Result<TrustedProxies> Parse(const std::vector<std::string>& cidrs);
  // `address` as ClientIp reads addresses (an IP, optionally with a port).
  bool Contains(std::string_view address) const;

 private:
  friend KeyExtractor ClientIp(TrustedProxies trusted, ClientPrefixes prefixes);
  struct Networks;
  std::shared_ptr<const Networks> networks_;
};

// The client's IP, as a key in one canonical form per client: an IPv4-mapped IPv6 address
// (::ffff:192.0.2.1, as a dual-stack socket reports an IPv4 peer) becomes the IPv4 one, and the
// address is keyed by its network under `prefixes` (ClientPrefixes::KeyOf): by default an IPv4
// client by its address and an IPv6 client by its /64 ("2001:db8:1:2::/64").
//
// It is the peer address, unless the peer is a trusted proxy. Then X-Forwarded-For is read: all
// its lines, in order, as one list (a client may send its own line, which a proxy may follow with
// a second rather than appending to it). Each hop appended the address it received from, so only
// the right part, written by our proxies, can be believed: the list is walked from the right past
// trusted proxies, and the first address that is not one is the client. Entries may carry a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711") and IPv6 ones a zone id ("fe80::1%eth0"), which is
// dropped; empty entries are no entries ("," is an empty list). An entry that is not an
// address ("unknown", garbage) stops the walk and the last address walked is the key: the
// trusted proxy that passed it on (or the peer), so a malformed header never yields a key of
// the client's choosing. When every entry is a trusted proxy, the left-most is the key. The walk
// matches trusted proxies by their full addresses; the prefix applies to the client found.
KeyExtractor ClientIp(TrustedProxies trusted = {}, ClientPrefixes prefixes = {});
// The value of a header (an API key, a user id); of its first line when it comes in several, the
// one frameworks' lookups return.
KeyExtractor Header(std::string name);
// The request path in its canonical form, so that every spelling of one path is one key: the
// query dropped, percent-encodings of unreserved characters decoded, dot segments resolved, empty
// segments and a trailing slash dropped ("/%6cogin", "//login", "/a/../login" and "/login/?x=1"
// are all "/login"; an encoded "%2F" stays encoded). A path with a '%' not followed by two hex
// digits has nothing to key on: such requests share the key "-" (in a Compose, the part "-").
KeyExtractor Path();
// Several keys joined with '|', e.g. Compose({ClientIp(), Path()}) limits each client per path.
// The parts can always be told apart: a '|' or a backslash in a part is escaped with a
// backslash, a part with nothing to key on is "-", and a part that is "-" itself is "\-".
KeyExtractor Compose(std::vector<KeyExtractor> parts);

// The key checked for an extracted key: `key` itself, unless it is above kMaxKeyBytes or starts
// with "sha256:", then "sha256:" and its SHA-256 in hex (as above). INTERNAL if libcrypto fails.
Result<std::string> StoredKey(std::string key);

// The answer for one request.
struct Verdict {
  bool allowed = true;
  // 429 when the limit denies; 503 or 500 when the check could not be decided (see above).
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // the JSON error when refused (Content-Type: application/json)
  // Shaping: how long to hold the request before handling it (its booked slot); the adapters
  // wait it out. Zero otherwise.
  Duration delay{0};
  // The store was out and a failure policy decided (as Decision::degraded).
  bool degraded = false;
  // Shadow mode: the limit would have denied this request, which is allowed all the same.
  bool would_deny = false;
  // Why the store did not decide, when it did not: the error the request was refused for, or
  // the outage fail_open admitted it through. Ok otherwise (the failure policy of a
  // ResilientStore decides with no error reaching the middleware).
  Status error;
};

struct RateLimiterOptions {
  // Units each request costs.
  int64_t cost = 1;
  // Requests beyond the limit's burst delayed to the rate instead of refused (see above); 0
  // refuses all excess. Needs token_bucket, leaky_bucket or gcra.
  int64_t delay = 0;
  // Decide and count, but admit every request (see above). Not with `delay`: a shadow limiter
  // holds nothing back.
  bool shadow_mode = false;
  // Shadow mode: called with each decision (allowed or not), e.g. to count the would-be denials.
  // Called on the thread that completes the check; it must be safe to call concurrently.
  std::function<void(const Decision&)> on_shadow_decision = nullptr;
};

class RateLimiter {
 public:
  // `policy_name` names the policy in the RateLimit headers. A configuration every check would
  // fail on is refused here, with the error such a check would get, rather than built into a
  // middleware that refuses every request: COST_EXCEEDS_LIMIT for a cost above the limit's
  // capacity; INVALID_ARGUMENT for no key extractor, a limiter name above kMaxScopeBytes, a
  // negative cost or delay, a delay on an algorithm that cannot book slots, a delay whose
  // wait would exceed MaxDelayOf(limit), or a delay in shadow mode.
  static Result<RateLimiter> Create(Limiter& limiter, KeyExtractor key, std::string policy_name,
                                    RateLimiterOptions options = {});

  // A check the store could not decide is refused, or decided by the failure policy when the
  // store is out (see the top of this file).
  Verdict Check(const RequestView& request) const;
  void CheckAsync(const RequestView& request, std::function<void(Verdict)> done) const;

 private:
  RateLimiter(Limiter& limiter, KeyExtractor key, std::string policy_name,
              RateLimiterOptions options, Duration max_delay);
  Result<std::string> KeyOf(const RequestView& request) const;
  Verdict ToVerdict(const Result<Decision>& decision) const;
  Verdict Undecided(Status error) const;

  Limiter& limiter_;
  KeyExtractor key_;
  std::string policy_name_;
  std::string policy_header_;
  int64_t cost_;
  Duration max_delay_;  // shaping when above zero
  bool shadow_mode_;
  std::function<void(const Decision&)> on_shadow_decision_;
};

}  // namespace sluice::middleware
