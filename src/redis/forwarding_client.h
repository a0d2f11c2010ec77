// ForwardingClient: a redis::Client whose every call goes, unchanged, to another Client chosen
// per call (Target: a master found through Redis Sentinel, say), or fails at once with the
// subclass's status while there is none. Each reply is shown to a watch, on the thread that
// received it, before the caller gets it: what a reply says of the client it came from (READONLY,
// a lost connection) is how a subclass learns to choose another.
//
// Thread safety: as redis::Client; Target and NoTarget are called from any thread, the watch
// from the I/O threads, possibly after the ForwardingClient is gone (it holds what it needs).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "redis/client.h"

namespace sluice::redis {

class ForwardingClient : public Client {
 public:
  // What a reply (or each reply of a batch) from `from` says, seen before the caller sees it.
  using ReplyWatch = std::function<void(const Client& from, const Result<Reply>& reply)>;

  using Client::Command;
  using Client::EvalSha;
  void Command(std::span<const std::string_view> argv, const CallOptions& options,
               ReplyCallback done) final;
  void EvalSha(const Script& script, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, const CallOptions& options,
               ReplyCallback done) final;
  void EvalShaCoalesced(const CoalescibleCall& call, const CallOptions& options,
                        ReplyCallback done) final;
  void EvalShaCoalescedBatch(std::span<const CoalescibleCall> calls, BatchReplyCallback done) final;
  void EvalShaBatch(std::span<const ScriptCall> calls, BatchReplyCallback done) final;

  // The target's, NoTarget() and zeros while there is none.
  Status Connected() const final;
  ClientStats stats_for_testing() const final;

 protected:
  explicit ForwardingClient(ReplyWatch watch)
      : watch_(std::make_shared<const ReplyWatch>(std::move(watch))) {}

  // The client to send a call to; null while there is none.
  virtual std::shared_ptr<Client> Target() const = 0;
  // What a call fails with while there is no target.
  virtual Status NoTarget() const = 0;

 private:
  ReplyCallback Watched(const std::shared_ptr<Client>& target, ReplyCallback done) const;
  BatchReplyCallback Watched(const std::shared_ptr<Client>& target, BatchReplyCallback done) const;

  const std::shared_ptr<const ReplyWatch> watch_;
};

}  // namespace sluice::redis
