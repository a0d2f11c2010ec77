#include "rls/service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "rls/answer.h"
#include "rls/plan.h"

namespace sluice::rls {
namespace {

// A ShouldRateLimit in progress: its plan sent to the store, once more when only quotas refused
// it, then answered.
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
        done_(std::move(done)),
        plan_(store, *config_, request) {}

  Status BuildPlan() { return plan_.Build(); }
  // Admits the call's checks for `caller`, held until the call ends; else answers the call busy
  // at once (AnswerBusy) and returns false.
  bool Admit(core::FairAdmission& admission, core::FairAdmission::Caller caller);
  void Decide();
  void Fail(const Status& error) { done_(error); }

 private:
  void Send(size_t group);
  bool RetryWithoutQuotasOver(const std::vector<Verdict>& verdicts);
  void Finish();

  Store& store_;
  std::shared_ptr<const ServiceConfig> config_;
  Stats& stats_;
  const pb::RateLimitRequest& request_;
  pb::RateLimitResponse& response_;
  std::function<void(Status)> done_;
  rls::Plan plan_;
  bool retried_ = false;  // the enforced group was sent again without the quotas over
  std::atomic<int> pending_{0};
  core::FairAdmission::Ticket ticket_;
  std::chrono::steady_clock::time_point admitted_at_;
};

bool Call::Admit(core::FairAdmission& admission, core::FairAdmission::Caller caller) {
  size_t units = 0;
  for (const CheckGroup& group : plan_.groups) units += group.requests.size();
  if (units == 0) return true;
  ticket_ = admission.Admit(caller, units);
  admitted_at_ = std::chrono::steady_clock::now();
  if (ticket_) return true;
  AnswerBusy(request_.descriptors_size(), core::FairAdmission::kRetryAfterSeconds, response_);
  done_(Status::Ok());
  return false;
}

void Call::Decide() {
  // The groups, and this call's own hold until every group is sent.
  pending_.store(static_cast<int>(plan_.groups.size()) + 1, std::memory_order_relaxed);
  for (size_t g = 0; g < plan_.groups.size(); ++g) Send(g);
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

// Decides `group`, holding one of pending_, and finishes the call when it is the last.
void Call::Send(size_t group) {
  CheckGroup& sent = plan_.groups[group];
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

// A request refused only because some of its quotas are over, while another may still admit it,
// is decided once more without them (which report the first answer). Once only: a second refusal
// is the answer, so a request costs at most two store calls.
bool Call::RetryWithoutQuotasOver(const std::vector<Verdict>& verdicts) {
  if (retried_ || !plan_.EnforcedRefused()) return false;
  const auto over = [&verdicts](size_t d) { return verdicts[d].over; };
  bool quota_over = false;
  for (size_t d = 0; d < verdicts.size(); ++d) {
    quota_over = quota_over || (over(d) && plan_.Quota(d) && !plan_.Shadow(d));
  }
  if (!quota_over || plan_.Denies(over)) return false;
  retried_ = true;
  plan_.enforced = plan_.Split(plan_.enforced, over);
  pending_.store(1, std::memory_order_relaxed);
  Send(plan_.enforced);
  return true;
}

void Call::Finish() {
  ticket_.Answered(
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - admitted_at_));
  for (const CheckGroup& group : plan_.groups) {
    if (group.decisions.ok()) continue;
    // The store or this instance is full (a check that waited past its deadline in this process's
    // queue): refused as the admission refuses, since an error would let Envoy's default
    // failure_mode_deny: false through.
    if (group.decisions.status().code() == StatusCode::kResourceExhausted) {
      AnswerBusy(request_.descriptors_size(), core::FairAdmission::kRetryAfterSeconds, response_);
      return done_(Status::Ok());
    }
    return done_(group.decisions.status());
  }
  for (const LimitCheck& check : plan_.checks) {
    if (check.request == kNone || !check.error_if_degraded) continue;
    if ((*plan_.groups[check.group].decisions)[check.request].degraded()) {
      return done_(Status::Unavailable("the store is out and the limit sets no on_error"));
    }
  }
  const std::vector<Verdict> verdicts = VerdictsOf(plan_);
  if (RetryWithoutQuotasOver(verdicts)) return;
  Answer(plan_, verdicts, stats_, response_);
  done_(Status::Ok());
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
  if (Status s = call->BuildPlan(); !s.ok()) return call->Fail(s);
  core::FairAdmission* admission = admission_.load();
  if (admission != nullptr && !call->Admit(*admission, caller)) return;
  call->Decide();
}

}  // namespace sluice::rls
