#include "rls/answer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "middleware/rate_limit_headers.h"
#include "rls/stats.h"

namespace sluice::rls {
namespace {

uint32_t Clamp32(int64_t value) {
  return static_cast<uint32_t>(std::clamp<int64_t>(value, 0, std::numeric_limits<uint32_t>::max()));
}

void AddHeader(pb::RateLimitResponse& response, std::string_view name, std::string value) {
  auto* header = response.add_response_headers_to_add();
  header->set_key(std::string(name));
  header->set_value(std::move(value));
}

Verdict VerdictOf(const Plan& plan, size_t descriptor) {
  Verdict verdict;
  for (const size_t c : plan.checks_of[descriptor]) {
    const LimitCheck& check = plan.checks[c];
    const CheckGroup& group = plan.groups[check.group];
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

}  // namespace

std::vector<Verdict> VerdictsOf(const Plan& plan) {
  std::vector<Verdict> verdicts;
  verdicts.reserve(plan.matches.size());
  for (size_t d = 0; d < plan.matches.size(); ++d) verdicts.push_back(VerdictOf(plan, d));
  return verdicts;
}

void Answer(const Plan& plan, const std::vector<Verdict>& verdicts, Stats& stats,
            pb::RateLimitResponse& response) {
  const bool denied =
      plan.EnforcedRefused() || plan.Denies([&verdicts](size_t d) { return verdicts[d].over; });
  response.set_overall_code(denied ? pb::RateLimitResponse::OVER_LIMIT : pb::RateLimitResponse::OK);
  const Verdict* headline = nullptr;
  for (size_t d = 0; d < plan.matches.size(); ++d) {
    const rls::Match& match = plan.matches[d];
    const Verdict& verdict = verdicts[d];
    auto* status = response.add_statuses();
    status->set_code(pb::RateLimitResponse::OK);
    if (match.kind == MatchKind::kUnlimited) {
      status->set_limit_remaining(std::numeric_limits<uint32_t>::max());
      stats.Record(stats.For(plan.stats_keys[d]), {.hits = plan.hits[d]});
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
    stats.Record(
        stats.For(plan.stats_keys[d]),
        {.hits = plan.hits[d],
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
      spec.name.empty() ? plan.stats_keys[headline->reported->descriptor] : spec.name;
  AddHeader(response, "RateLimit-Policy", middleware::RateLimitPolicyValue(name, *spec.limit));
  AddHeader(response, "RateLimit", middleware::RateLimitValue(name, headline->decision));
  // None for hits above the limit itself: no wait admits them.
  if (std::string retry_after = middleware::RetryAfterValue(headline->decision);
      headline->over && !retry_after.empty()) {
    AddHeader(response, "Retry-After", std::move(retry_after));
  }
  if (plan.options().x_ratelimit_headers) {
    AddHeader(response, "X-RateLimit-Limit", std::to_string(spec.requests_per_unit));
    AddHeader(response, "X-RateLimit-Remaining",
              std::to_string(Clamp32(headline->decision.remaining)));
    AddHeader(response, "X-RateLimit-Reset",
              std::to_string(middleware::CeilSeconds(headline->decision.reset_after)));
  }
}

void AnswerBusy(int descriptors, int retry_after_seconds, pb::RateLimitResponse& response) {
  response.set_overall_code(pb::RateLimitResponse::OVER_LIMIT);
  for (int d = 0; d < descriptors; ++d) {
    response.add_statuses()->set_code(pb::RateLimitResponse::OVER_LIMIT);
  }
  AddHeader(response, "Retry-After", std::to_string(retry_after_seconds));
}

}  // namespace sluice::rls
