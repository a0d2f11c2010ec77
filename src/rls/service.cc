#include "rls/service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/hashed_key.h"
#include "middleware/rate_limit_headers.h"
#include "rls/stats.h"
#include "sluice/limiter.h"

namespace sluice::rls {
namespace {

// The scope of a configured limit's counters, and of a request's own limit's. A descriptor's
// second and later limits count under "rls#<index>", on the same key: one hash tag, so a Redis
// Cluster decides them together.
constexpr std::string_view kScope = "rls";
constexpr std::string_view kOverrideScope = "rls.override";
constexpr size_t kNone = std::numeric_limits<size_t>::max();

// One limit of one descriptor, and where it is decided.
struct LimitCheck {
  size_t descriptor = 0;
  const RateLimitSpec* spec = nullptr;
  size_t group = 0;  // index in Call::groups_
  bool shadow = false;
  size_t request = kNone;  // index in its group's requests; kNone: over the limit here
  bool error_if_degraded = false;
};

// The checks decided by one Store::CheckAll: the enforced descriptors' or the shadow ones'.
struct CheckGroup {
  bool shadow = false;
  std::vector<CheckRequest> requests;
  std::vector<bool> over_here;  // per request: its cost is above the limit's capacity
  bool any_over_here = false;
  Result<std::vector<Decision>> decisions = std::vector<Decision>{};
};

// One descriptor's verdict, as reported.
struct Verdict {
  const LimitCheck* reported = nullptr;  // its most constrained limit; null without one
  Decision decision;
  bool over = false;
};

uint32_t Clamp32(int64_t value) {
  return static_cast<uint32_t>(std::clamp<int64_t>(value, 0, std::numeric_limits<uint32_t>::max()));
}

void AddHeader(pb::RateLimitResponse& response, std::string_view name, std::string value) {
  auto* header = response.add_response_headers_to_add();
  header->set_key(std::string(name));
  header->set_value(std::move(value));
}

// A ShouldRateLimit in progress, from the match to the answer.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(Store& store, std::shared_ptr<const ServiceConfig> config, Stats& stats,
       const pb::RateLimitRequest& request, pb::RateLimitResponse& response,
       std::function<void(Status)> done)
      : store_(store),
        config_(std::move(config)),
        stats_(stats),
        request_(request),
        response_(response),
        done_(std::move(done)) {}

  Status Match();
  // Admits the call's checks for `caller`, held until the call ends; else answers the call
  // OVER_LIMIT with Retry-After at once (never an error: Envoy's failure_mode_deny, false by
  // default, would let the request through) and returns false.
  bool Admit(core::FairAdmission& admission, core::FairAdmission::Caller caller);
  void Decide();
  void Fail(const Status& error) { done_(error); }

 private:
  uint64_t HitsOf(const envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d) const {
    if (d.has_hits_addend()) return d.hits_addend().value();
    return request_.hits_addend() == 0 ? 1 : request_.hits_addend();
  }
  size_t GroupFor(bool shadow);
  void AddCheck(size_t descriptor, const RateLimitSpec& spec, size_t index, bool shadow);
  bool Shadow(size_t descriptor) const;
  bool Quota(size_t descriptor) const;
  bool OverHere(const LimitCheck& check) const;
  template <typename Over>
  size_t Split(size_t group, Over over);
  void Send(size_t group);
  template <typename Over>
  bool Denies(Over over) const;
  bool EnforcedRefused() const;
  bool RetryWithoutQuotasOver(const std::vector<Verdict>& verdicts);
  void Finish();
  Verdict VerdictOf(size_t descriptor) const;
  void Answer(const std::vector<Verdict>& verdicts);

  Store& store_;
  std::shared_ptr<const ServiceConfig> config_;
  Stats& stats_;
  const pb::RateLimitRequest& request_;
  pb::RateLimitResponse& response_;
  std::function<void(Status)> done_;

  std::vector<rls::Match> matches_;
  std::vector<uint64_t> hits_;
  std::vector<std::string> counter_keys_;  // per descriptor
  std::vector<std::string> stats_keys_;    // per descriptor
  // Per LimitCheck, reserved up front: the requests point into them.
  std::vector<std::string> scopes_;
  std::vector<Limiter> limiters_;
  std::vector<LimitCheck> checks_;
  std::vector<std::vector<size_t>> checks_of_;  // per descriptor: its LimitChecks
  std::vector<CheckGroup> groups_;
  size_t enforced_ = kNone;  // the group deciding the enforced descriptors' checks
  bool retried_ = false;     // enforced_ was sent again without the quotas over
  std::atomic<int> pending_{0};
  core::FairAdmission::Ticket ticket_;
  std::chrono::steady_clock::time_point admitted_at_;
};

bool Call::Admit(core::FairAdmission& admission, core::FairAdmission::Caller caller) {
  size_t units = 0;
  for (const CheckGroup& group : groups_) units += group.requests.size();
  if (units == 0) return true;
  ticket_ = admission.Admit(caller, units);
  admitted_at_ = std::chrono::steady_clock::now();
  if (ticket_) return true;
  response_.set_overall_code(pb::RateLimitResponse::OVER_LIMIT);
  for (int d = 0; d < request_.descriptors_size(); ++d) {
    response_.add_statuses()->set_code(pb::RateLimitResponse::OVER_LIMIT);
  }
  AddHeader(response_, "Retry-After", std::to_string(core::FairAdmission::kRetryAfterSeconds));
  done_(Status::Ok());
  return false;
}

Status Call::Match() {
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
  matches_.reserve(n);
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
    auto match = config_->matcher.Find(request_.domain(), entries, override_limit, keys);
    if (!match.ok()) return match.status();
    const bool keyed = match->kind != MatchKind::kNoLimit;
    if (!keyed) {
      counter_keys_.emplace_back();
    } else {
      // A value of any length is counted: a long key is hashed, as the middleware's are.
      std::optional<std::string> stored = base::StoredKey(keys.counter, kMaxKeyBytes);
      if (!stored) return Status::Internal("libcrypto could not compute a SHA-256");
      counter_keys_.push_back(std::move(*stored));
    }
    // Bounded as the stats keep it: it also names the limit in the response's headers.
    stats_keys_.push_back(keyed ? Stats::KeyOf(keys.stats) : std::string());
    matches_.push_back(std::move(*match));
    hits_.push_back(HitsOf(descriptor));
  }
  ApplyReplaces(matches_);

  size_t limits = 0;
  for (const rls::Match& match : matches_) limits += match.limits().size();
  scopes_.reserve(limits);
  limiters_.reserve(limits);
  checks_.reserve(limits);
  checks_of_.resize(n);
  for (size_t d = 0; d < n; ++d) {
    const auto specs = matches_[d].limits();
    for (size_t i = 0; i < specs.size(); ++i) AddCheck(d, specs[i], i, Shadow(d));
  }
  // Over a limit already, without asking the store. A request denied that way only looks at the
  // others (of its kind: the shadow checks never deny the enforced ones). Quotas over, when some
  // other quota may still admit, are looked at apart: the rest is decided without them.
  std::vector<bool> over_here(n, false);
  for (const LimitCheck& check : checks_) {
    if (!check.shadow && OverHere(check)) over_here[check.descriptor] = true;
  }
  const auto is_over_here = [&over_here](size_t d) { return over_here[d]; };
  const bool denied = Denies(is_over_here);
  for (CheckGroup& group : groups_) {
    if (group.shadow ? !group.any_over_here : !denied) continue;
    for (CheckRequest& check : group.requests) check.cost = 0;
  }
  if (!denied && std::find(over_here.begin(), over_here.end(), true) != over_here.end()) {
    // Only quotas are over: the others are decided in a group of their own, and this one, all
    // peeks, reports the quotas over.
    const size_t peeked = enforced_;
    enforced_ = Split(peeked, is_over_here);
    for (CheckRequest& check : groups_[peeked].requests) check.cost = 0;
  }
  return Status::Ok();
}

size_t Call::GroupFor(bool shadow) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].shadow == shadow) return g;
  }
  groups_.emplace_back().shadow = shadow;
  if (!shadow) enforced_ = groups_.size() - 1;
  return groups_.size() - 1;
}

bool Call::Shadow(size_t descriptor) const {
  return matches_[descriptor].shadow_mode() || config_->options.shadow_mode;
}

// As in that service: an unlimited descriptor is never in quota mode, and the service's
// quota_mode takes in those that match no limit (which are never over).
bool Call::Quota(size_t descriptor) const {
  const rls::Match& match = matches_[descriptor];
  return match.kind != MatchKind::kUnlimited &&
         (config_->options.quota_mode || (match.kind == MatchKind::kLimited && match.quota_mode()));
}

bool Call::OverHere(const LimitCheck& check) const {
  return check.request == kNone || groups_[check.group].over_here[check.request];
}

// The checks of `group` whose descriptor is not `over` move to a new group with their requests,
// which decides them from then on; the others stay, with the group's decisions.
template <typename Over>
size_t Call::Split(size_t group, Over over) {
  CheckGroup split;
  split.shadow = groups_[group].shadow;
  std::vector<size_t> moved_to(groups_[group].requests.size(), kNone);
  for (LimitCheck& check : checks_) {
    if (check.group != group || check.request == kNone || over(check.descriptor)) continue;
    size_t& to = moved_to[check.request];
    if (to == kNone) {
      to = split.requests.size();
      split.requests.push_back(groups_[group].requests[check.request]);
      split.over_here.push_back(groups_[group].over_here[check.request]);
    }
    check.request = to;
    check.group = groups_.size();
  }
  groups_.push_back(std::move(split));
  return groups_.size() - 1;
}

// Whether the descriptors `over` their limits deny the request: any enforced one does, unless it
// is in quota mode; those in quota mode deny it together, when every one of them is over.
template <typename Over>
bool Call::Denies(Over over) const {
  bool quotas = false, every_quota_over = true;
  for (size_t d = 0; d < matches_.size(); ++d) {
    const bool denies = over(d) && !Shadow(d);
    if (!Quota(d)) {
      if (denies) return true;
      continue;
    }
    quotas = true;
    every_quota_over = every_quota_over && denies;
  }
  return quotas && every_quota_over;
}

void Call::AddCheck(size_t descriptor, const RateLimitSpec& spec, size_t index, bool shadow) {
  LimitCheck& check = checks_.emplace_back();
  checks_of_[descriptor].push_back(checks_.size() - 1);
  check.descriptor = descriptor;
  check.spec = &spec;
  check.group = GroupFor(shadow);
  check.shadow = shadow;
  const auto& options = config_->options;
  check.error_if_degraded = !spec.on_error && !options.default_on_error;
  const std::string& key = counter_keys_[descriptor];
  std::string& scope =
      scopes_.emplace_back(matches_[descriptor].override_limit ? kOverrideScope : kScope);
  if (index > 0) scope += "#" + std::to_string(index);
  CheckGroup& into = groups_[check.group];
  const uint64_t hits = hits_[descriptor];
  if (!spec.limit) {  // 0 requests per unit: every hit is over
    into.any_over_here = true;
    return;
  }
  for (size_t r = 0; r < into.requests.size(); ++r) {
    if (into.requests[r].scope == scope && into.requests[r].key == key) {
      check.request = r;
      into.requests[r].cost = static_cast<int64_t>(
          std::min<uint64_t>(static_cast<uint64_t>(into.requests[r].cost) + hits,
                             std::numeric_limits<int64_t>::max() / 2));
      if (into.requests[r].cost > into.requests[r].limit->capacity()) {
        into.over_here[r] = into.any_over_here = true;
      }
      return;
    }
  }
  check.request = into.requests.size();
  const int64_t cost =
      static_cast<int64_t>(std::min<uint64_t>(hits, std::numeric_limits<int64_t>::max() / 2));
  const Limiter& limiter = limiters_.emplace_back(
      store_, scope, *spec.limit,
      spec.on_error.value_or(options.default_on_error.value_or(FailurePolicy::kFailClosed)));
  into.requests.push_back(limiter.Request(key, cost));
  const bool over = cost > spec.limit->capacity();
  into.over_here.push_back(over);
  into.any_over_here = into.any_over_here || over;
}

void Call::Decide() {
  // The groups, and this call's own hold until every group is sent.
  pending_.store(static_cast<int>(groups_.size()) + 1, std::memory_order_relaxed);
  for (size_t g = 0; g < groups_.size(); ++g) Send(g);
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

// Decides `group`, holding one of pending_, and finishes the call when it is the last.
void Call::Send(size_t group) {
  CheckGroup& sent = groups_[group];
  if (sent.requests.empty()) {
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
    return;
  }
  store_.CheckAllAsync(sent.requests,
                       [self = shared_from_this(), &sent](Result<std::vector<Decision>> decisions) {
                         sent.decisions = std::move(decisions);
                         if (self->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1)
                           self->Finish();
                       });
}

// Whether the store refused the enforced checks (all or nothing: then none consumed anything).
bool Call::EnforcedRefused() const {
  if (enforced_ == kNone) return false;
  const auto& decisions = *groups_[enforced_].decisions;
  return std::any_of(decisions.begin(), decisions.end(),
                     [](const Decision& d) { return !d.allowed; });
}

// A request refused only because some of its quotas are over, while another may still admit it,
// is decided once more without them (which report the first answer). Once only: a second refusal
// is the answer, so a request costs at most two store calls.
bool Call::RetryWithoutQuotasOver(const std::vector<Verdict>& verdicts) {
  if (retried_ || !EnforcedRefused()) return false;
  const auto over = [&verdicts](size_t d) { return verdicts[d].over; };
  bool quota_over = false;
  for (size_t d = 0; d < verdicts.size(); ++d) {
    quota_over = quota_over || (over(d) && Quota(d) && !Shadow(d));
  }
  if (!quota_over || Denies(over)) return false;
  retried_ = true;
  enforced_ = Split(enforced_, over);
  pending_.store(1, std::memory_order_relaxed);
  Send(enforced_);
  return true;
}

Verdict Call::VerdictOf(size_t descriptor) const {
  Verdict verdict;
  for (const size_t c : checks_of_[descriptor]) {
    const LimitCheck& check = checks_[c];
    const CheckGroup& group = groups_[check.group];
    Decision decision;
    bool over = true;
    if (check.request != kNone) {
      decision = (*group.decisions)[check.request];
      over =
          group.over_here[check.request] || (!decision.allowed && decision.retry_after.count() > 0);
    }
    const bool better = verdict.reported == nullptr || (over && !verdict.over) ||
                        (over == verdict.over && decision.remaining < verdict.decision.remaining);
    if (better) {
      verdict.reported = &check;
      verdict.decision = decision;
      verdict.over = over;
    }
  }
  return verdict;
}

void Call::Finish() {
  ticket_.Answered(
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - admitted_at_));
  for (const CheckGroup& group : groups_) {
    if (!group.decisions.ok()) return done_(group.decisions.status());
  }
  for (const LimitCheck& check : checks_) {
    if (check.request == kNone || !check.error_if_degraded) continue;
    if ((*groups_[check.group].decisions)[check.request].degraded()) {
      return done_(Status::Unavailable("the store is out and the limit sets no on_error"));
    }
  }
  std::vector<Verdict> verdicts;
  verdicts.reserve(matches_.size());
  for (size_t d = 0; d < matches_.size(); ++d) verdicts.push_back(VerdictOf(d));
  if (RetryWithoutQuotasOver(verdicts)) return;
  Answer(verdicts);
  done_(Status::Ok());
}

void Call::Answer(const std::vector<Verdict>& verdicts) {
  const bool denied =
      EnforcedRefused() || Denies([&verdicts](size_t d) { return verdicts[d].over; });
  response_.set_overall_code(denied ? pb::RateLimitResponse::OVER_LIMIT
                                    : pb::RateLimitResponse::OK);
  const Verdict* headline = nullptr;
  for (size_t d = 0; d < matches_.size(); ++d) {
    const rls::Match& match = matches_[d];
    const Verdict& verdict = verdicts[d];
    auto* status = response_.add_statuses();
    status->set_code(pb::RateLimitResponse::OK);
    if (match.kind == MatchKind::kUnlimited) {
      status->set_limit_remaining(std::numeric_limits<uint32_t>::max());
      stats_.Record(stats_.For(stats_keys_[d]), {.hits = hits_[d]});
    }
    if (verdict.reported == nullptr) continue;
    const RateLimitSpec& spec = *verdict.reported->spec;
    const bool shadow = verdict.reported->shadow;
    if (verdict.over && !shadow) status->set_code(pb::RateLimitResponse::OVER_LIMIT);
    auto* limit = status->mutable_current_limit();
    limit->set_name(spec.name);
    limit->set_requests_per_unit(spec.requests_per_unit);
    limit->set_unit(static_cast<pb::RateLimitResponse::RateLimit::Unit>(spec.unit));
    status->set_limit_remaining(Clamp32(verdict.decision.remaining));
    const auto reset =
        std::chrono::duration_cast<std::chrono::microseconds>(verdict.decision.reset_after);
    status->mutable_duration_until_reset()->set_seconds(reset.count() / 1'000'000);
    status->mutable_duration_until_reset()->set_nanos(
        static_cast<int32_t>(reset.count() % 1'000'000 * 1000));
    stats_.Record(
        stats_.For(stats_keys_[d]),
        {.hits = hits_[d],
         .over_limit = verdict.over,
         .shadow_mode = shadow,
         .requests_per_unit = spec.requests_per_unit,
         .remaining = static_cast<uint64_t>(std::max<int64_t>(0, verdict.decision.remaining))});
    // A quota over, in a request another quota admitted, constrains nothing.
    const bool counts = !shadow && spec.limit && (denied || !verdict.over);
    if (counts && (headline == nullptr || (verdict.over && !headline->over) ||
                   (verdict.over == headline->over &&
                    verdict.decision.remaining < headline->decision.remaining))) {
      headline = &verdict;
    }
  }
  if (headline == nullptr) return;
  const RateLimitSpec& spec = *headline->reported->spec;
  const std::string& name =
      spec.name.empty() ? stats_keys_[headline->reported->descriptor] : spec.name;
  AddHeader(response_, "RateLimit-Policy", middleware::RateLimitPolicyValue(name, *spec.limit));
  AddHeader(response_, "RateLimit", middleware::RateLimitValue(name, headline->decision));
  // None for hits above the limit itself: no wait admits them.
  if (std::string retry_after = middleware::RetryAfterValue(headline->decision);
      headline->over && !retry_after.empty()) {
    AddHeader(response_, "Retry-After", std::move(retry_after));
  }
  if (config_->options.x_ratelimit_headers) {
    AddHeader(response_, "X-RateLimit-Limit", std::to_string(spec.requests_per_unit));
    AddHeader(response_, "X-RateLimit-Remaining",
              std::to_string(Clamp32(headline->decision.remaining)));
    AddHeader(response_, "X-RateLimit-Reset",
              std::to_string(middleware::CeilSeconds(headline->decision.reset_after)));
  }
}

}  // namespace

Service::Service(Store& store, Stats& stats, std::shared_ptr<const ServiceConfig> config)
    : store_(store), stats_(stats), config_(std::move(config)) {}

void Service::SetConfig(std::shared_ptr<const ServiceConfig> config) {
  base::MutexLock lock(mu_);
  config_.swap(config);
}

std::shared_ptr<const ServiceConfig> Service::config() const {
  base::MutexLock lock(mu_);
  return config_;
}

void Service::ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse& response,
                              std::function<void(Status)> done,
                              core::FairAdmission::Caller caller) {
  auto call = std::make_shared<Call>(store_, config(), stats_, request, response, std::move(done));
  if (Status s = call->Match(); !s.ok()) return call->Fail(s);
  core::FairAdmission* admission = admission_.load();
  if (admission != nullptr && !call->Admit(*admission, caller)) return;
  call->Decide();
}

}  // namespace sluice::rls
