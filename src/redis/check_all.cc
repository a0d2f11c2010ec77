#include "redis/check_all.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "redis/cluster_slots.h"
#include "redis/reply_gather.h"
#include "redis/scripts.h"

namespace sluice::redis {
namespace {

using Steady = std::chrono::steady_clock;

// One node's check_all.lua call.
struct NodeCall {
  uint32_t node = 0;
  int slot = 0;                        // of its first key: the slot its keys are declared in
  std::vector<size_t> checks;          // indexes of its requests
  std::vector<int64_t> counts;         // their limits' counts
  std::vector<std::string_view> keys;  // the keys in `slot`
  std::vector<std::string_view> args;  // now, margin, mode, then the checks
  bool cross_slot = false;             // some of its keys are in other slots
};

class AllOrNothing : public std::enable_shared_from_this<AllOrNothing> {
 public:
  AllOrNothing(Client& client, size_t checks, AllCallback done)
      : client_(client), checks_(checks), done_(std::move(done)) {}

  void Build(const CheckContext& context, std::span<const CheckRequest> requests) {
    words_.AddClock(context);
    std::vector<size_t> starts;
    starts.reserve(requests.size() + 1);
    for (const auto& r : requests) {
      starts.push_back(words_.size());
      words_.AddCheckOfAll(context, r);
    }
    starts.push_back(words_.size());
    views_ = words_.views();
    for (size_t i = 0; i < requests.size(); ++i) {
      // The words of check i: algorithm name, key count, keys, cost, parameters.
      const auto first = views_.begin() + static_cast<std::ptrdiff_t>(starts[i]);
      const auto last = views_.begin() + static_cast<std::ptrdiff_t>(starts[i + 1]);
      const auto keys = std::span(first + 2, CheckKeyCount(*requests[i].limit));
      const int slot = KeySlot(keys.front());
      const uint32_t node = client_.NodeIdOf(static_cast<uint16_t>(slot));
      auto call = std::find_if(calls_.begin(), calls_.end(),
                               [node](const NodeCall& c) { return c.node == node; });
      if (call == calls_.end()) {
        call = calls_.emplace(calls_.end());
        call->node = node;
        call->slot = slot;
        call->args = {views_[0], views_[1], kChargeMode};  // now, margin, mode
      }
      call->checks.push_back(i);
      call->counts.push_back(requests[i].limit->count());
      call->args.insert(call->args.end(), first, last);
      if (slot == call->slot) {
        call->keys.insert(call->keys.end(), keys.begin(), keys.end());
      } else {
        call->cross_slot = true;
      }
    }
  }

  void Start(Duration timeout) {
    if (calls_.size() == 1) return Send(kChargeMode, &AllOrNothing::Charged);
    deadline_ = Steady::now() + timeout;
    Send(kPeekMode, &AllOrNothing::Peeked);
  }

 private:
  using Then = void (AllOrNothing::*)(std::vector<Result<Reply>>);

  // Every node's call in `mode`, in parallel; `then` gets their replies in node order.
  void Send(std::string_view mode, Then then) {
    auto gather = std::make_shared<ReplyGather>(
        calls_.size(), [self = shared_from_this(), then](std::vector<Result<Reply>> replies) {
          ((*self).*then)(std::move(replies));
        });
    // The calls' views are copied or formatted before EvalSha returns: `args` may change after.
    for (size_t n = 0; n < calls_.size(); ++n) {
      NodeCall& call = calls_[n];
      call.args[kCheckAllModeArg] = mode;
      client_.EvalSha(CheckAllScript(), call.keys, call.args,
                      CallOptions{.deadline = deadline_, .cross_slot = call.cross_slot},
                      ReplyGather::Slot(gather, n));
    }
  }

  // If every check admits, charges; otherwise that is the answer, nothing consumed.
  void Peeked(std::vector<Result<Reply>> replies) {
    Result<std::vector<Decision>> decisions = Decisions(replies);
    if (!decisions.ok()) return done_(decisions.status());
    if (!AllAllowed(*decisions)) return Refused(std::move(*decisions));
    if (Steady::now() >= *deadline_) {
      return done_(Status::DeadlineExceeded(
          "the deadline of a Redis CheckAll passed between its peek and its charge"));
    }
    Send(kChargeMode, &AllOrNothing::Charged);
  }

  void Charged(std::vector<Result<Reply>> replies) {
    Result<std::vector<Decision>> decisions = Decisions(replies);
    if (!decisions.ok()) return done_(decisions.status());
    if (!AllAllowed(*decisions)) return Refused(std::move(*decisions));
    done_(std::move(*decisions));
  }

  // The checks that admitted (a peek's that would, or a node's that charged while another
  // refused) are reported refused; their retry_after is 0 already.
  void Refused(std::vector<Decision> decisions) {
    for (auto& d : decisions) d.allowed = false;
    done_(std::move(decisions));
  }

  static bool AllAllowed(const std::vector<Decision>& decisions) {
    return std::all_of(decisions.begin(), decisions.end(),
                       [](const Decision& d) { return d.allowed; });
  }

  // The nodes' decisions in the requests' order; the first node's error if any failed.
  Result<std::vector<Decision>> Decisions(const std::vector<Result<Reply>>& replies) const {
    std::vector<Decision> decisions(checks_);
    for (size_t n = 0; n < calls_.size(); ++n) {
      Result<std::vector<Decision>> node = ParseCheckAllReply(replies[n], calls_[n].counts);
      if (!node.ok()) return node.status();
      for (size_t j = 0; j < node->size(); ++j) decisions[calls_[n].checks[j]] = (*node)[j];
    }
    return decisions;
  }

  Client& client_;
  const size_t checks_;
  const AllCallback done_;
  ScriptWords words_;
  ScriptWords::Views views_;
  std::vector<NodeCall> calls_;
  // Several nodes: both phases' calls answer by this, fixed at the start. One node: the
  // client's own deadline.
  std::optional<Steady::time_point> deadline_;
};

}  // namespace

void CheckAllAsync(Client& client, const CheckContext& context, Duration timeout,
                   std::span<const CheckRequest> requests, AllCallback done) {
  auto all = std::make_shared<AllOrNothing>(client, requests.size(), std::move(done));
  all->Build(context, requests);
  all->Start(timeout);
}

}  // namespace sluice::redis
