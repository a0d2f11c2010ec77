#include "rls/plan.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/hashed_key.h"
#include "rls/stats.h"

namespace sluice::rls {
namespace {

// The scope of a configured limit's counters, and of a request's own limit's. A descriptor's
// second and later limits count under "rls#<index>", on the same key: one hash tag, so a Redis
// Cluster decides them together.
constexpr std::string_view kScope = "rls";
constexpr std::string_view kOverrideScope = "rls.override";

}  // namespace

uint64_t Plan::HitsOf(
    const envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d) const {
  if (d.has_hits_addend()) return d.hits_addend().value();
  return request_.hits_addend() == 0 ? 1 : request_.hits_addend();
}

Status Plan::Build() {
  if (request_.domain().empty()) {
    return Status::InvalidArgument("rate limit domain must not be empty");
  }
  if (request_.descriptors().empty()) {
    return Status::InvalidArgument("rate limit descriptor list must not be empty");
  }
  const size_t n = request_.descriptors_size();
  // Checked before the matching, whose cost grows with the square of the descriptors: a request
  // of more than the store decides at once is refused before it costs anything.
  if (n > kMaxCheckAll) {
    return Status::InvalidArgument("a rate limit request has at most " +
                                   std::to_string(kMaxCheckAll) + " descriptors, got " +
                                   std::to_string(n));
  }
  matches.reserve(n);
  std::vector<DescriptorEntry> entries;
  MatchKeys keys;
  for (const auto& descriptor : request_.descriptors()) {
    if (descriptor.is_negative_hits()) {
      return Status::InvalidArgument(
          "is_negative_hits is not supported: hits are never given back");
    }
    entries.clear();
    for (const auto& entry : descriptor.entries()) entries.push_back({entry.key(), entry.value()});
    std::optional<LimitOverride> override_limit;
    if (descriptor.has_limit()) {
      override_limit = LimitOverride{descriptor.limit().requests_per_unit(),
                                     static_cast<uint32_t>(descriptor.limit().unit())};
    }
    auto match = config_.matcher.Find(request_.domain(), entries, override_limit, keys);
    if (!match.ok()) return match.status();
    const bool keyed = match->kind != MatchKind::kNoLimit;
    if (!keyed) {
      counter_keys.emplace_back();
    } else {
      // A value of any length is counted: a long key is hashed, as the middleware's are.
      std::optional<std::string> stored = base::StoredKey(keys.counter, kMaxKeyBytes);
      if (!stored) return Status::Internal("libcrypto could not compute a SHA-256");
      counter_keys.push_back(std::move(*stored));
    }
    // Bounded as the stats keep it: it also names the limit in the response's headers.
    stats_keys.push_back(keyed ? Stats::KeyOf(keys.stats) : std::string());
    matches.push_back(std::move(*match));
    hits.push_back(HitsOf(descriptor));
  }
  ApplyReplaces(matches);

  size_t limits = 0;
  for (const rls::Match& match : matches) limits += match.limits().size();
  scopes.reserve(limits);
  limiters.reserve(limits);
  checks.reserve(limits);
  checks_of.resize(n);
  for (size_t d = 0; d < n; ++d) {
    const auto specs = matches[d].limits();
    for (size_t i = 0; i < specs.size(); ++i) AddCheck(d, specs[i], i, Shadow(d));
  }
  // Over a limit already, without asking the store. A request denied that way only looks at the
  // others (of its kind: the shadow checks never deny the enforced ones). Quotas over, when some
  // other quota may still admit, are looked at apart: the rest is decided without them.
  std::vector<bool> over_here(n, false);
  for (const LimitCheck& check : checks) {
    if (!check.shadow && OverHere(check)) over_here[check.descriptor] = true;
  }
  const auto is_over_here = [&over_here](size_t d) { return over_here[d]; };
  const bool denied = Denies(is_over_here);
  for (CheckGroup& group : groups) {
    if (group.shadow ? !group.any_over_here : !denied) continue;
    for (CheckRequest& check : group.requests) check.cost = 0;
  }
  if (!denied && std::find(over_here.begin(), over_here.end(), true) != over_here.end()) {
    // Only quotas are over: the others are decided in a group of their own, and this one, all
    // peeks, reports the quotas over.
    const size_t peeked = enforced;
    enforced = Split(peeked, is_over_here);
    for (CheckRequest& check : groups[peeked].requests) check.cost = 0;
  }
  return Status::Ok();
}

size_t Plan::GroupFor(bool shadow) {
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].shadow == shadow) return g;
  }
  groups.emplace_back().shadow = shadow;
  if (!shadow) enforced = groups.size() - 1;
  return groups.size() - 1;
}

bool Plan::Shadow(size_t descriptor) const {
  return matches[descriptor].shadow_mode() || config_.options.shadow_mode;
}

// As in that service: an unlimited descriptor is never in quota mode, and the service's
// quota_mode takes in those that match no limit (which are never over).
bool Plan::Quota(size_t descriptor) const {
  const rls::Match& match = matches[descriptor];
  return match.kind != MatchKind::kUnlimited &&
         (config_.options.quota_mode || (match.kind == MatchKind::kLimited && match.quota_mode()));
}

bool Plan::OverHere(const LimitCheck& check) const {
  return check.request == kNone || groups[check.group].over_here[check.request];
}

void Plan::AddCheck(size_t descriptor, const RateLimitSpec& spec, size_t index, bool shadow) {
  LimitCheck& check = checks.emplace_back();
  checks_of[descriptor].push_back(checks.size() - 1);
  check.descriptor = descriptor;
  check.spec = &spec;
  check.group = GroupFor(shadow);
  check.shadow = shadow;
  const auto& options = config_.options;
  check.error_if_degraded = !spec.on_error && !options.default_on_error;
  const std::string& key = counter_keys[descriptor];
  std::string& scope =
      scopes.emplace_back(matches[descriptor].override_limit ? kOverrideScope : kScope);
  if (index > 0) scope += "#" + std::to_string(index);
  CheckGroup& into = groups[check.group];
  const uint64_t added = hits[descriptor];
  if (!spec.limit) {  // 0 requests per unit: every hit is over
    into.any_over_here = true;
    return;
  }
  for (size_t r = 0; r < into.requests.size(); ++r) {
    if (into.requests[r].scope == scope && into.requests[r].key == key) {
      check.request = r;
      into.requests[r].cost = static_cast<int64_t>(
          std::min<uint64_t>(static_cast<uint64_t>(into.requests[r].cost) + added,
                             std::numeric_limits<int64_t>::max() / 2));
      if (into.requests[r].cost > into.requests[r].limit->capacity()) {
        into.over_here[r] = into.any_over_here = true;
      }
      return;
    }
  }
  check.request = into.requests.size();
  const int64_t cost =
      static_cast<int64_t>(std::min<uint64_t>(added, std::numeric_limits<int64_t>::max() / 2));
  const Limiter& limiter = limiters.emplace_back(
      store_, scope, *spec.limit,
      spec.on_error.value_or(options.default_on_error.value_or(FailurePolicy::kFailClosed)));
  into.requests.push_back(limiter.Request(key, cost));
  const bool over = cost > spec.limit->capacity();
  into.over_here.push_back(over);
  into.any_over_here = into.any_over_here || over;
}

bool Plan::EnforcedRefused() const {
  if (enforced == kNone) return false;
  const auto& decisions = *groups[enforced].decisions;
  return std::any_of(decisions.begin(), decisions.end(),
                     [](const Decision& d) { return !d.allowed; });
}

}  // namespace sluice::rls
