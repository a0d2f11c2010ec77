// The client and its pool: AsioClient owns its connections (connection.h) on its I/O threads
// (io_threads.h: its own, or shared) and picks the connection each call goes out on.
#include "redis/client.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <future>
#include <thread>

#include "base/await.h"
#include "redis/connection.h"
#include "redis/io_threads.h"
#include "redis/reply_gather.h"

namespace sluice::redis {
namespace {

class AsioClient final : public Client {
 public:
  AsioClient(ClientOptions options, std::shared_ptr<IoThreads> threads)
      : options_(WithCoalesceBehind(std::move(options), threads->size())),
        threads_(std::move(threads)) {
    for (int t = 0; t < threads_->size(); ++t) {
      for (int c = 0; c < options_.connections_per_thread; ++c) {
        connections_.push_back(std::make_shared<Connection>(threads_->at(t), options_,
                                                            static_cast<int>(connections_.size())));
      }
    }
    for (auto& c : connections_) c->Start();
  }

  // Shuts every connection down on its thread; a connection lives on until its last handler has
  // run there, and the threads stop with the last client that shares them.
  ~AsioClient() override {
    std::vector<std::future<void>> done;
    for (size_t i = 0; i < connections_.size(); ++i) {
      auto& io = threads_->at(static_cast<int>(i) / options_.connections_per_thread);
      auto stopped = std::make_shared<std::promise<void>>();
      done.push_back(stopped->get_future());
      asio::post(io, [c = connections_[i], stopped] {
        c->Shutdown();
        stopped->set_value();
      });
    }
    for (auto& f : done) f.wait();
  }

  void WaitReady() {
    const auto until = Steady::now() + options_.connect_timeout + std::chrono::milliseconds(20);
    while (Steady::now() < until) {
      bool all = true;
      for (auto& c : connections_) all = all && c->ready();
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  using Client::Command;
  using Client::EvalSha;

  void Command(std::span<const std::string_view> argv, const CallOptions& options,
               ReplyCallback done) override {
    Pending entry;
    entry.done = std::move(done);
    std::string command;
    AppendCommand(argv, command);
    SubmitOne(options, std::move(entry), std::move(command));
  }

  void EvalSha(const Script& script, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, const CallOptions& options,
               ReplyCallback done) override {
    Pending entry = EvalEntry(ScriptCall{&script, keys, args}, std::move(done));
    entry.asking = options.asking;
    std::string command = entry.command;
    SubmitOne(options, std::move(entry), std::move(command));
  }

  void EvalShaCoalesced(const CoalescibleCall& call, const CallOptions& options,
                        ReplyCallback done) override {
    const ScriptCall& single = call.single;
    if (options_.coalesce_max <= 1 || options.asking) {
      return EvalSha(*single.script, single.keys, single.args, options, std::move(done));
    }
    CoalescedCheck check =
        ToCheck(call, options.deadline.value_or(Steady::now() + options_.timeout), std::move(done));
    Pick().SubmitCoalesced({&check, 1});
  }

  void EvalShaCoalescedBatch(std::span<const CoalescibleCall> calls,
                             BatchReplyCallback done) override {
    if (calls.empty()) return done({});
    if (options_.coalesce_max <= 1) {
      std::vector<ScriptCall> singles;
      singles.reserve(calls.size());
      for (const CoalescibleCall& call : calls) singles.push_back(call.single);
      return EvalShaBatch(singles, std::move(done));
    }
    const auto deadline = Steady::now() + options_.timeout;
    std::vector<CoalescedCheck> checks;
    checks.reserve(calls.size());
    if (calls.size() == 1) {
      checks.push_back(ToCheck(calls[0], deadline, [done = std::move(done)](Result<Reply> reply) {
        std::vector<Result<Reply>> replies;
        replies.push_back(std::move(reply));
        done(std::move(replies));
      }));
    } else {
      auto gather = std::make_shared<ReplyGather>(calls.size(), std::move(done));
      for (size_t i = 0; i < calls.size(); ++i) {
        checks.push_back(ToCheck(calls[i], deadline, ReplyGather::Slot(gather, i)));
      }
    }
    Pick().SubmitCoalesced(checks);
  }

  void EvalShaBatch(std::span<const ScriptCall> calls, BatchReplyCallback done) override {
    if (calls.empty()) return done({});
    auto gather = std::make_shared<ReplyGather>(calls.size(), std::move(done));
    std::string bytes;
    std::vector<Pending> entries;
    entries.reserve(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      entries.push_back(EvalEntry(calls[i], ReplyGather::Slot(gather, i)));
      bytes.append(entries.back().command);
    }
    Pick().Submit(std::move(bytes), std::move(entries));
  }

  // One server: node 0.
  std::string AddressOf(uint32_t id) const override {
    return id == 0 ? ServerAddress(options_) : std::string();
  }

  Status Connected() const override {
    for (auto& c : connections_) {
      if (c->ready()) return Status::Ok();
    }
    return connections_.front()->ReadyStatus();
  }

  ClientStats stats_for_testing() const override {
    ClientStats total;
    for (auto& c : connections_) total += c->stats();
    return total;
  }

 private:
  // coalesce_behind 0 resolved: Redis has a call to serve next while a connection's replies are
  // handled, on another connection or behind the first call on the only one.
  static ClientOptions WithCoalesceBehind(ClientOptions options, int threads) {
    if (options.coalesce_behind == 0) {
      options.coalesce_behind = threads * options.connections_per_thread >= 2 ? 1 : 2;
    }
    return options;
  }

  // The check as its connection joins it to a coalesced call.
  CoalescedCheck ToCheck(const CoalescibleCall& call, Steady::time_point deadline,
                         ReplyCallback done) const {
    return CoalescedCheck{.many = call.many,
                          .across_slots = call.across_slots,
                          .words = CoalescedCheckWords::Of(call),
                          .done = std::move(done),
                          .deadline = deadline,
                          .max = options_.coalesce_max};
  }

  // One call, after ASKING when the options ask for it, with the options' deadline if any.
  void SubmitOne(const CallOptions& options, Pending entry, std::string command) {
    entry.deadline = options.deadline.value_or(Steady::now() + options_.timeout);
    entry.out_of_order = options.deadline.has_value();
    std::vector<Pending> entries;
    if (options.asking) {
      std::string asking;
      AppendCommand(kAsking, asking);
      command.insert(0, asking);
      entries.push_back(IgnoredReply(entry.deadline));
    }
    entries.push_back(std::move(entry));
    Pick().Submit(std::move(command), std::move(entries));
  }

  Pending EvalEntry(const ScriptCall& call, ReplyCallback done) {
    Pending p;
    p.kind = Pending::Kind::kEval;
    p.script = call.script;
    p.done = std::move(done);
    p.deadline = Steady::now() + options_.timeout;
    AppendEvalSha(call, p.command);
    return p;
  }

  // On one of the client's threads, the ready connection there with fewer calls pending (a
  // check and its reply stay on the caller's thread, see io_threads.h); otherwise, of the next two
  // ready connections in round-robin order, the one with fewer calls pending.
  Connection& Pick() {
    if (const int t = threads_->current(); t >= 0) {
      const auto per = static_cast<size_t>(options_.connections_per_thread);
      Connection* local = nullptr;
      for (size_t i = static_cast<size_t>(t) * per; i < (static_cast<size_t>(t) + 1) * per; ++i) {
        Connection& c = *connections_[i];
        if (c.ready() && (local == nullptr || c.pending() < local->pending())) local = &c;
      }
      if (local != nullptr) return *local;
    }
    const size_t n = connections_.size();
    const size_t start = next_.fetch_add(1, std::memory_order_relaxed);
    Connection* best = nullptr;
    for (size_t i = 0; i < n; ++i) {
      Connection& c = *connections_[(start + i) % n];
      if (!c.ready()) continue;
      if (best == nullptr) {
        best = &c;
        continue;
      }
      if (c.pending() < best->pending()) best = &c;
      break;
    }
    return best != nullptr ? *best : *connections_[start % n];  // none ready: UNAVAILABLE
  }

  const ClientOptions options_;
  const std::shared_ptr<IoThreads> threads_;
  std::vector<std::shared_ptr<Connection>> connections_;
  std::atomic<size_t> next_{0};
};

}  // namespace

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  const int threads = options.io_threads;
  return Create(std::move(options), threads < 1 ? nullptr : std::make_shared<IoThreads>(threads));
}

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options,
                                               std::shared_ptr<IoThreads> threads) {
  if (options.unix_path.empty() && (options.port <= 0 || options.port > 65535)) {
    return Status::InvalidArgument("Redis port must be from 1 to 65535");
  }
  if (options.timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return Status::InvalidArgument("Redis timeouts must be positive");
  }
  if (threads == nullptr || options.connections_per_thread < 1) {
    return Status::InvalidArgument("a Redis client needs at least one thread and connection");
  }
  if (options.max_pending_per_connection < 1) {
    return Status::InvalidArgument("max_pending_per_connection must be at least 1");
  }
  if (options.reconnect_min.count() <= 0 || options.reconnect_max < options.reconnect_min) {
    return Status::InvalidArgument("reconnect_min must be positive and at most reconnect_max");
  }
  auto client = std::make_unique<AsioClient>(std::move(options), std::move(threads));
  client->WaitReady();
  return std::unique_ptr<Client>(std::move(client));
}

Result<Reply> Client::CommandSync(std::span<const std::string_view> argv) {
  return base::Await<Result<Reply>>([&](auto done) { Command(argv, std::move(done)); });
}

Result<Reply> Client::EvalShaSyncForTesting(const Script& script,
                                            std::span<const std::string_view> keys,
                                            std::span<const std::string_view> args) {
  return base::Await<Result<Reply>>(
      [&](auto done) { EvalSha(script, keys, args, std::move(done)); });
}

}  // namespace sluice::redis
