// Matcher: finds the rate limit envoyproxy/ratelimit would apply to one request descriptor, and
// the keys it would count it under, with that service's rules (its config_impl.go GetLimit):
//
//  - The descriptor's entries are matched one level of the domain's tree each, in order. At each
//    level: the exact "key_value" first, then the level's wildcard values in the order the file
//    gives them ('*' matches any run of characters, anywhere in the value), then the key alone
//    (a descriptor without a value). No match at a level ends the walk with no limit.
//  - A limit applies only when the last entry lands on a descriptor with a rate limit: a request
//    with more entries than the tree is deep, or fewer, gets no limit.
//  - A request descriptor that carries its own limit override gets that limit (fixed window, no
//    shadow mode), provided the domain is configured.
//  - Keys: the counter key is "domain_key1_value1_key2_value2_" with the request's own values
//    (a wildcard's match too), except that a wildcard level marked share_threshold puts the
//    configured pattern in place of the value, so its matches share one counter. The stats key is
//    that service's stats name ("domain.key1_value1.key2", refined by detailed_metric and
//    value_to_metric).
//
// The tree is flattened once into hash maps keyed by the composite "key_value", looked up without
// building strings: a warm caller that reuses its MatchKeys allocates nothing per call.
// Immutable once built: Find may be called from any number of threads at once, each with its own
// MatchKeys.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rls/config.h"
#include "sluice/status.h"

namespace sluice::rls {

struct DescriptorEntry {
  std::string_view key;
  std::string_view value;
};

// RateLimitDescriptor.limit: the limit a client asks for, its unit as numbered on the wire.
struct LimitOverride {
  uint32_t requests_per_unit = 0;
  uint32_t unit = 0;
};

enum class MatchKind : uint8_t {
  // Unknown domain, no descriptor at the request's depth, a descriptor without a rate limit, or a
  // rate limit replaced by another in the same request (ApplyReplaces): admitted, not counted.
  kNoLimit,
  // `unlimited: true`: admitted, not counted; that service reports limit_remaining UINT32_MAX.
  kUnlimited,
  // Check every one of limits().
  kLimited,
};

struct Match {
  MatchKind kind = MatchKind::kNoLimit;
  // The configured descriptor matched; null for kNoLimit and for an override. Still set after
  // ApplyReplaces dropped its rule, with `replaced` true.
  const Descriptor* descriptor = nullptr;
  // The request's own limit, when it gave one.
  std::optional<RateLimitSpec> override_limit;
  bool replaced = false;

  // The limits to check: the override, or the descriptor's rule's; empty unless kLimited.
  std::span<const RateLimitSpec> limits() const;
  // The configured flags; false for an override, as in that service.
  bool shadow_mode() const { return descriptor != nullptr && descriptor->shadow_mode; }
  bool quota_mode() const { return descriptor != nullptr && descriptor->quota_mode; }
};

struct MatcherNode;  // one configured descriptor, flattened (matcher.cc)

// How an entry matched its level: the exact "key_value", a wildcard value, or the key alone.
enum class MatchedBy : uint8_t { kExact, kWildcard, kKey };

// The keys of a match, written by Find. Reuse one per thread: its buffers keep their capacity.
struct MatchKeys {
  std::string counter;
  std::string stats;

  // Find's working state: the descriptor each entry matched, and the composite key looked up.
  struct Step {
    const MatcherNode* node;
    MatchedBy how;
  };
  std::vector<Step> steps;
  std::string composite;
};

class Matcher {
 public:
  static Result<Matcher> Create(Config config);

  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;
  ~Matcher();

  // The match for one request descriptor. `keys` is written when the result is kLimited or
  // kUnlimited. Errors: INVALID_ARGUMENT for an override whose unit is UNKNOWN or not a unit.
  Result<Match> Find(std::string_view domain, std::span<const DescriptorEntry> entries,
                     const std::optional<LimitOverride>& override_limit, MatchKeys& keys) const;

  bool HasDomain(std::string_view domain) const;
  const Config& config() const;

 private:
  struct Index;
  explicit Matcher(std::unique_ptr<Index> index);

  std::unique_ptr<Index> index_;
};

// Applies `replaces` across the matches of one request, as that service does: every matched
// rule's replaces (an unlimited one's too) are collected, then each kLimited match from the
// configuration with a limit of a replaced name becomes kNoLimit (a rule of several limits is
// dropped whole when any of its names is replaced). Overrides are never replaced.
void ApplyReplaces(std::span<Match> matches);

}  // namespace sluice::rls
