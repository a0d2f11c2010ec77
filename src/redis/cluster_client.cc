// Design notes.
//
// Routing a call costs one short lock (a snapshot of the slot map, cluster_map.h) and a lookup.
// A call owns a copy of its words from the start: a redirection re-sends it after the caller's
// views are gone. Its deadline is fixed when it is made and carried over to the re-send
// (CallOptions::deadline), so a redirected call is answered by the same deadline as any other.
#include "redis/cluster_client.h"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <optional>
#include <utility>

#include "redis/cluster_map.h"
#include "redis/reply_gather.h"

namespace sluice::redis {
namespace {

using Steady = std::chrono::steady_clock;

// The one slot of `keys` (-1 when there are none); an error when they span several.
Result<int> SlotOfKeys(std::span<const std::string_view> keys) {
  int slot = -1;
  for (const auto key : keys) {
    const int s = KeySlot(key);
    if (slot >= 0 && s != slot) {
      return Status::InvalidArgument(
          "the keys of one script call hash to different Redis Cluster slots (" +
          std::to_string(slot) + " and " + std::to_string(s) +
          "): no script can use them atomically; give them one hash tag");
    }
    slot = s;
  }
  return slot;
}

}  // namespace

namespace cluster {

struct Call {
  const Script* script = nullptr;  // null: a command
  const Script* many = nullptr;    // a check that may coalesce (CoalescibleCall)
  size_t own_arg = 0;              // with `many`
  // The words, owned (a check's fit in the call's own allocation), and views of them: argv, or
  // keys then args.
  boost::container::small_vector<char, 256> bytes;
  boost::container::small_vector<std::string_view, 8> words;
  size_t key_count = 0;
  int slot = -1;  // -1: any master will do
  Steady::time_point deadline;
  bool cross_slot = false;  // CallOptions::cross_slot: ASK is not followed
  bool redirected = false;
  ReplyCallback done;

  // Copies the words, as views of one buffer.
  void Own(std::span<const std::string_view> first, std::span<const std::string_view> second) {
    size_t total = 0;
    for (auto w : first) total += w.size();
    for (auto w : second) total += w.size();
    bytes.reserve(total);
    words.reserve(first.size() + second.size());
    for (auto part : {first, second}) {
      for (auto w : part) {
        const size_t at = bytes.size();
        bytes.insert(bytes.end(), w.begin(), w.end());
        words.push_back(std::string_view(bytes.data() + at, w.size()));  // no reallocation
      }
    }
  }

  std::span<const std::string_view> keys() const { return {words.data(), key_count}; }
  std::span<const std::string_view> args() const {
    return std::span<const std::string_view>(words).subspan(key_count);
  }
};

}  // namespace cluster

Result<std::unique_ptr<ClusterClient>> ClusterClient::Create(ClusterOptions options) {
  if (options.seeds.empty()) {
    return Status::InvalidArgument("a Redis Cluster client needs at least one seed node");
  }
  if (options.node.db != 0 || !options.node.unix_path.empty()) {
    return Status::InvalidArgument("Redis Cluster nodes are reached over TCP, on database 0");
  }
  if (options.node.io_threads < 1) {
    return Status::InvalidArgument("a Redis Cluster client needs at least one I/O thread");
  }
  if (options.refresh_interval.count() <= 0 || options.refresh_min_gap.count() < 0) {
    return Status::InvalidArgument(
        "the slot map refresh interval must be positive and its minimum gap not negative");
  }
  std::unique_ptr<ClusterClient> client(new ClusterClient(std::move(options)));
  // Only options a node's Client refuses fail here; an unreachable cluster is retried.
  if (Status s = client->Refresh(); s.code() == StatusCode::kInvalidArgument) return s;
  client->refresher_ = std::thread([c = client.get()] { c->RefreshLoop(); });
  return client;
}

ClusterClient::ClusterClient(ClusterOptions options)
    : options_(std::move(options)),
      io_threads_(std::make_shared<IoThreads>(options_.node.io_threads)),
      map_(std::make_shared<SlotMap>()),
      node_ids_(std::make_unique<std::atomic<uint32_t>[]>(kClusterSlots)) {}

ClusterClient::~ClusterClient() {
  base::MutexLock lock(mu_);
  stopping_ = true;
  wake_.notify_all();
  lock.Unlock();
  if (refresher_.joinable()) refresher_.join();
  lock.Lock();
  while (redirecting_ != 0) lock.Wait(redirected_);
  std::shared_ptr<const SlotMap> last = std::move(map_);
  lock.Unlock();
  // Closing the nodes fails their pending calls, whose callbacks take mu_.
  last.reset();
  retired_.clear();
}

std::shared_ptr<const ClusterClient::SlotMap> ClusterClient::Map() const {
  base::MutexLock lock(mu_);
  return map_;
}

void ClusterClient::Command(std::span<const std::string_view> argv, const CallOptions& options,
                            ReplyCallback done) {
  auto call = std::make_shared<Call>();
  call->Own(argv, {});
  if (argv.size() > 1) call->slot = KeySlot(argv[1]);
  call->deadline = options.deadline.value_or(Steady::now() + options_.node.timeout);
  call->done = std::move(done);
  Send(std::move(call), options);
}

void ClusterClient::EvalSha(const Script& script, std::span<const std::string_view> keys,
                            std::span<const std::string_view> args, const CallOptions& options,
                            ReplyCallback done) {
  EvalSha(script, keys, args, options, std::move(done), nullptr, 0);
}

void ClusterClient::EvalSha(const Script& script, std::span<const std::string_view> keys,
                            std::span<const std::string_view> args, const CallOptions& options,
                            ReplyCallback done, const Script* many, size_t own_arg) {
  const Result<int> slot = SlotOfKeys(keys);
  if (!slot.ok()) return done(slot.status());
  auto call = std::make_shared<Call>();
  call->script = &script;
  call->many = many;
  call->own_arg = own_arg;
  call->Own(keys, args);
  call->key_count = keys.size();
  call->slot = *slot;
  call->deadline = options.deadline.value_or(Steady::now() + options_.node.timeout);
  call->cross_slot = options.cross_slot;
  call->done = std::move(done);
  Send(std::move(call), options);
}

void ClusterClient::EvalShaCoalesced(const CoalescibleCall& call, const CallOptions& options,
                                     ReplyCallback done) {
  EvalSha(*call.single.script, call.single.keys, call.single.args, options, std::move(done),
          call.many, call.own_arg);
}

void ClusterClient::EvalShaBatch(std::span<const ScriptCall> calls, BatchReplyCallback done) {
  std::vector<CoalescibleCall> singles;
  singles.reserve(calls.size());
  for (const ScriptCall& call : calls) singles.push_back({.single = call});
  SendBatch(singles, std::move(done));
}

void ClusterClient::EvalShaCoalescedBatch(std::span<const CoalescibleCall> calls,
                                          BatchReplyCallback done) {
  SendBatch(calls, std::move(done));
}

void ClusterClient::SendBatch(std::span<const CoalescibleCall> calls, BatchReplyCallback done) {
  if (calls.empty()) return done({});
  auto gather = std::make_shared<ReplyGather>(calls.size(), std::move(done));
  const auto deadline = Steady::now() + options_.node.timeout;
  const auto map = Map();
  // Each node's share of the batch, in the batch's order.
  std::vector<std::pair<Node*, std::vector<std::shared_ptr<Call>>>> shares;
  for (size_t i = 0; i < calls.size(); ++i) {
    const ScriptCall& single = calls[i].single;
    auto call = std::make_shared<Call>();
    call->done = ReplyGather::Slot(gather, i);
    const Result<int> slot = SlotOfKeys(single.keys);
    if (!slot.ok()) {
      call->done(slot.status());
      continue;
    }
    Node* node = map->Serving(*slot);
    if (node == nullptr) {
      Unserved(*call, *slot);
      continue;
    }
    call->script = single.script;
    call->many = calls[i].many;
    call->own_arg = calls[i].own_arg;
    call->Own(single.keys, single.args);
    call->key_count = single.keys.size();
    call->slot = *slot;
    call->deadline = deadline;
    auto share = std::find_if(shares.begin(), shares.end(),
                              [node](const auto& s) { return s.first == node; });
    if (share == shares.end()) {
      shares.emplace_back(node, std::vector<std::shared_ptr<Call>>());
      share = std::prev(shares.end());
    }
    share->second.push_back(std::move(call));
  }
  for (auto& share : shares) {
    Node* node = share.first;
    auto answered = [this, node, calls = share.second](std::vector<Result<Reply>> replies) {
      for (size_t j = 0; j < calls.size(); ++j) {
        OnReply(*node, calls[j],
                j < replies.size() ? std::move(replies[j]) : Status::Internal("no reply"));
      }
    };
    if (share.second.front()->many == nullptr) {
      std::vector<ScriptCall> script_calls;
      script_calls.reserve(share.second.size());
      for (const auto& call : share.second) {
        script_calls.push_back({call->script, call->keys(), call->args()});
      }
      node->client->EvalShaBatch(script_calls, std::move(answered));
      continue;
    }
    // A node's checks are in many slots: coalesced across slots.
    std::vector<CoalescibleCall> coalescible;
    coalescible.reserve(share.second.size());
    for (const auto& call : share.second) {
      coalescible.push_back({.single = {call->script, call->keys(), call->args()},
                             .many = call->many,
                             .own_arg = call->own_arg,
                             .across_slots = true});
    }
    node->client->EvalShaCoalescedBatch(coalescible, std::move(answered));
  }
}

void ClusterClient::Send(std::shared_ptr<Call> call, const CallOptions& options) {
  const auto map = Map();
  Node* node = map->Serving(call->slot);
  if (node == nullptr) return Unserved(*call, call->slot);
  SendTo(*node, std::move(call), options);
}

void ClusterClient::SendTo(Node& node, std::shared_ptr<Call> call, const CallOptions& options) {
  // The node outlives the callbacks of its client: it is closed only after them.
  auto done = [this, &node, call](Result<Reply> r) { OnReply(node, call, std::move(r)); };
  if (call->many != nullptr) {
    const CoalescibleCall coalescible{.single = {call->script, call->keys(), call->args()},
                                      .many = call->many,
                                      .own_arg = call->own_arg,
                                      .across_slots = true};
    node.client->EvalShaCoalesced(coalescible, options, std::move(done));
  } else if (call->script != nullptr) {
    node.client->EvalSha(*call->script, call->keys(), call->args(), options, std::move(done));
  } else {
    node.client->Command(call->words, options, std::move(done));
  }
}

void ClusterClient::Unserved(Call& call, int slot) {
  RequestRefresh();
  call.done(Status::Unavailable(slot < 0 ? std::string("no Redis Cluster master known yet")
                                         : "no Redis Cluster master known for slot " +
                                               std::to_string(slot)));
}

void ClusterClient::OnReply(const Node& from, const std::shared_ptr<Call>& call,
                            Result<Reply> reply) {
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) RequestRefresh();  // failed over?
    return call->done(std::move(reply));
  }
  const std::optional<Redirect> redirect = ParseRedirect(*reply, from.address);
  const ClusterRefusal refusal = redirect ? ClusterRefusal::kNone : ParseClusterRefusal(*reply);
  if (redirect) {
    (redirect->ask ? asked_ : moved_).fetch_add(1, std::memory_order_relaxed);
    if (!redirect->ask) RequestRefresh();
  } else if (refusal == ClusterRefusal::kMapStale) {
    RequestRefresh();
  }
  // A coalesced call reaches keys of several slots: the redirection is its first check's, and a
  // refusal met one of its keys before anything was written (check_many.lua reads every key
  // first). Each check goes once more on its own, to the master of its slot.
  if (call->many != nullptr && (redirect || refusal != ClusterRefusal::kNone)) {
    return SendAlone(call);
  }
  if (redirect) {
    if (redirect->ask && call->cross_slot) {
      return call->done(Status::Unavailable(
          "Redis Cluster asked a script that reaches keys of several slots to " +
          redirect->address + " while a slot migrates: " + reply->str));
    }
    if (!call->redirected) return Redirected(call, *redirect);
    return call->done(Status::Unavailable("Redis Cluster redirected a call twice, last to " +
                                          redirect->address + ": " + reply->str));
  }
  if (refusal == ClusterRefusal::kNone) return call->done(std::move(reply));
  call->done(Status::Unavailable("Redis Cluster at " + from.address + ": " + reply->str));
}

void ClusterClient::SendAlone(const std::shared_ptr<Call>& call) {
  call->many = nullptr;
  if (Steady::now() >= call->deadline) {
    return call->done(Status::DeadlineExceeded(
        "Redis Cluster refused a coalesced check's call after the check's deadline"));
  }
  base::MutexLock lock(mu_);
  if (stopping_) {
    lock.Unlock();
    return call->done(Status::Unavailable("Redis Cluster client shut down"));
  }
  ++redirecting_;
  lock.Unlock();
  Send(call, CallOptions{.deadline = call->deadline});
  lock.Lock();
  if (--redirecting_ == 0) redirected_.notify_all();
}

void ClusterClient::Redirected(const std::shared_ptr<Call>& call, const Redirect& redirect) {
  if (Steady::now() >= call->deadline) {
    return call->done(Status::DeadlineExceeded("Redis Cluster redirected a call to " +
                                               redirect.address + " after its deadline"));
  }
  base::MutexLock lock(mu_);
  if (stopping_) {
    lock.Unlock();
    return call->done(Status::Unavailable("Redis Cluster client shut down"));
  }
  std::shared_ptr<Node> node = map_->Find(redirect.address);
  if (node == nullptr) {
    if (std::find(wanted_.begin(), wanted_.end(), redirect.address) == wanted_.end()) {
      wanted_.push_back(redirect.address);
    }
    refresh_requested_ = true;
    wake_.notify_all();
    lock.Unlock();
    return call->done(Status::Unavailable("Redis Cluster redirected a call to " + redirect.address +
                                          ", not connected yet"));
  }
  ++redirecting_;
  lock.Unlock();
  call->redirected = true;
  SendTo(*node, call, CallOptions{.deadline = call->deadline, .asking = redirect.ask});
  node.reset();
  lock.Lock();
  if (--redirecting_ == 0) redirected_.notify_all();
}

void ClusterClient::RequestRefresh() {
  base::MutexLock lock(mu_);
  if (refresh_requested_) return;
  refresh_requested_ = true;
  wake_.notify_all();
}

Status ClusterClient::Connected() const {
  const auto map = Map();
  Status last = Status::Unavailable("no node of the Redis Cluster is known");
  for (const auto& node : map->nodes) {
    last = node->client->Connected();
    if (last.ok()) break;
  }
  return last;
}

ClientStats ClusterClient::stats_for_testing() const {
  ClientStats total;
  {
    base::MutexLock lock(stats_mu_);
    total = retired_stats_;
  }
  const auto map = Map();
  for (const auto& node : map->nodes) total += node->client->stats_for_testing();
  return total;
}

ClusterStats ClusterClient::cluster_stats_for_testing() const {
  return ClusterStats{.refreshes = refreshes_.load(),
                      .moved = moved_.load(),
                      .asked = asked_.load(),
                      .nodes = Map()->nodes.size()};
}

std::string ClusterClient::MasterOfForTesting(uint16_t slot) const {
  const auto map = Map();
  const Node* node = map->Serving(slot);
  return node == nullptr ? std::string() : node->address;
}

}  // namespace sluice::redis
