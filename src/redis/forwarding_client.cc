#include "redis/forwarding_client.h"

#include <utility>
#include <vector>

namespace sluice::redis {

ReplyCallback ForwardingClient::Watched(const std::shared_ptr<Client>& target,
                                        ReplyCallback done) const {
  return [watch = watch_, from = target.get(), done = std::move(done)](Result<Reply> reply) {
    (*watch)(*from, reply);
    done(std::move(reply));
  };
}

BatchReplyCallback ForwardingClient::Watched(const std::shared_ptr<Client>& target,
                                             BatchReplyCallback done) const {
  return [watch = watch_, from = target.get(),
          done = std::move(done)](std::vector<Result<Reply>> replies) {
    for (const auto& reply : replies) (*watch)(*from, reply);
    done(std::move(replies));
  };
}

void ForwardingClient::Command(std::span<const std::string_view> argv, const CallOptions& options,
                               ReplyCallback done) {
  auto target = Target();
  if (target == nullptr) return done(NoTarget());
  target->Command(argv, options, Watched(target, std::move(done)));
}

void ForwardingClient::EvalSha(const Script& script, std::span<const std::string_view> keys,
                               std::span<const std::string_view> args, const CallOptions& options,
                               ReplyCallback done) {
  auto target = Target();
  if (target == nullptr) return done(NoTarget());
  target->EvalSha(script, keys, args, options, Watched(target, std::move(done)));
}

void ForwardingClient::EvalShaCoalesced(const CoalescibleCall& call, const CallOptions& options,
                                        ReplyCallback done) {
  auto target = Target();
  if (target == nullptr) return done(NoTarget());
  target->EvalShaCoalesced(call, options, Watched(target, std::move(done)));
}

void ForwardingClient::EvalShaCoalescedBatch(std::span<const CoalescibleCall> calls,
                                             BatchReplyCallback done) {
  auto target = Target();
  if (target == nullptr) {
    return done(std::vector<Result<Reply>>(calls.size(), Result<Reply>(NoTarget())));
  }
  target->EvalShaCoalescedBatch(calls, Watched(target, std::move(done)));
}

void ForwardingClient::EvalShaBatch(std::span<const ScriptCall> calls, BatchReplyCallback done) {
  auto target = Target();
  if (target == nullptr) {
    return done(std::vector<Result<Reply>>(calls.size(), Result<Reply>(NoTarget())));
  }
  target->EvalShaBatch(calls, Watched(target, std::move(done)));
}

Status ForwardingClient::Connected() const {
  auto target = Target();
  return target != nullptr ? target->Connected() : NoTarget();
}

ClientStats ForwardingClient::stats_for_testing() const {
  auto target = Target();
  return target != nullptr ? target->stats_for_testing() : ClientStats{};
}

}  // namespace sluice::redis
