// Design notes.
//
// Each connection lives on one I/O thread (one io_context per thread), so its socket, reader and
// in-flight queue need no lock. Callers on any thread format their command (hiredis) and append
// the bytes and a Pending entry to the connection's outgoing buffer under a short mutex; the
// first appender posts one flush. The flush moves everything accumulated into a single write,
// and whatever arrives while that write is in flight leaves in the next one: that is the
// auto-pipelining. Replies come back in order, so the in-flight queue is FIFO.
//
// Checks (SubmitCoalesced) gather longer: their call (coalescing_group.h says why and how its
// wait is counted) leaves only once fewer than coalesce_behind of the connection's calls await
// replies, so the checks that arrive during a round trip share one script call.
//
// Deadlines: every call on a connection has the same timeout, so deadlines grow along the FIFO
// and one timer per connection, armed at the oldest unfinished deadline, is enough. A call whose
// deadline passes gets DEADLINE_EXCEEDED at once but keeps its place in the queue, marked
// finished, so the late reply is matched to it and dropped. Calls re-sent after NOSCRIPT, calls
// given their own deadline (CallOptions), and calls stamped before another thread's yet queued
// after it (a preempted caller; found when queued) are out of FIFO order; while any is in flight
// the timer scans the whole queue. The queue is bounded (max_pending_per_connection), so is the
// scan. The deadlines are watched in connection_deadlines.cc; connecting, the handshake and
// reconnecting are in connection_setup.cc.
//
// NOSCRIPT (the script cache was flushed, or Redis restarted): the call is sent again in the
// pending slot it had, behind one SCRIPT LOAD of its script per connection, shared by every call
// that gets NOSCRIPT while that load is outstanding: Redis answers a connection in order, so an
// EVALSHA written after the SCRIPT LOAD finds the script.
#include "redis/connection.h"

#include <algorithm>
#include <functional>

namespace sluice::redis {

Pending IgnoredReply(Steady::time_point deadline, Pending::Kind kind) {
  Pending p;
  p.kind = kind;
  p.deadline = deadline;
  p.finished = true;
  return p;
}

std::string ServerAddress(const ClientOptions& options) {
  return options.unix_path.empty() ? options.host + ":" + std::to_string(options.port)
                                   : options.unix_path;
}

Connection::Connection(asio::io_context& io, ClientOptions options, int index)
    : io_(io),
      options_(std::move(options)),
      transport_(io),
      resolver_(io),
      deadline_timer_(io),
      reconnect_timer_(io),
      connect_timer_(io),
      reader_(std::make_unique<ReplyReader>()),
      hold_behind_(std::max<size_t>(options_.coalesce_behind, 1)),
      backoff_(options_.reconnect_min),
      jitter_(static_cast<uint32_t>(std::random_device{}() + index)) {}

void Connection::Start() {
  asio::post(io_, [this, self = shared_from_this()] { Connect(); });
}

// On any thread. Fails the entries inline when they can't be taken. Admission and queueing
// happen under one lock, and the connection becomes ready or stops being ready under that lock
// too, so a call admitted on a connection that then drops can never be written on the next one
// ahead of its AUTH and SELECT.
void Connection::Submit(std::string bytes, std::vector<Pending> entries) {
  Refusal refusal;
  {
    base::MutexLock lock(mu_);
    refusal = Admit(entries.size());
    if (refusal == Refusal::kNone) EnqueueLocked(bytes, entries);
  }
  if (refusal == Refusal::kNone) return;
  const Status status = Refuse(refusal);
  for (auto& e : entries) e.done(status);
}

void Connection::SubmitCoalesced(std::span<CoalescedCheck> checks) {
  Refusal refusal;
  {
    base::MutexLock lock(mu_);
    refusal = Admit(checks.size());
    if (refusal == Refusal::kNone) {
      for (CoalescedCheck& check : checks) JoinGroupLocked(check);
    }
  }
  if (refusal == Refusal::kNone) return;
  const Status status = Refuse(refusal);
  for (CoalescedCheck& check : checks) check.done(status);
}

void Connection::JoinGroupLocked(CoalescedCheck& check) SLUICE_REQUIRES(mu_) {
  if (!group_.empty() && !group_.Takes(check)) CloseGroupLocked();
  if (group_.Join(check, Steady::now())) PostFlushLocked();
}

void Connection::CloseGroupLocked(CoalescingGroup::Release release) SLUICE_REQUIRES(mu_) {
  if (group_.empty()) return;
  CoalescingGroup::Call call = group_.Close(release, Steady::now());
  // Even a check alone goes by `many`: after NOSCRIPT a call is sent again behind the calls
  // queued since, which a call of the other script, loaded, would overtake on the same key.
  Pending p;
  p.kind = Pending::Kind::kEval;
  p.script = call.many;
  p.members = std::move(call.members);
  p.out_of_order = true;  // its deadline moves to its next member's as they pass
  p.deadline = call.deadline;
  p.queued_at = call.started;
  p.sent_at = call.sent_at;
  p.hold_counts_by = call.hold_counts_by;
  p.command = std::move(call.command);
  outgoing_.append(p.command);
  AddEntryLocked(std::move(p));
}

// On the I/O thread, at shutdown.
void Connection::Shutdown() {
  stopping_ = true;
  resolver_.cancel();
  deadline_timer_.cancel();
  reconnect_timer_.cancel();
  connect_timer_.cancel();
  Drop(Status::Unavailable("Redis client shut down"));
}

Connection::Refusal Connection::Admit(size_t n) SLUICE_REQUIRES(mu_) {
  if (!ready()) return Refusal::kNotConnected;
  if (pending_.fetch_add(n, std::memory_order_relaxed) + n > options_.max_pending_per_connection) {
    pending_.fetch_sub(n, std::memory_order_relaxed);
    return Refusal::kTooManyPending;
  }
  return Refusal::kNone;
}

Status Connection::Refuse(Refusal refusal) const {
  // Redis not keeping up is an outage like any other: the rule's failure policy decides.
  if (refusal == Refusal::kTooManyPending) {
    return Status::Unavailable("Redis at " + Address() + " is not keeping up: " +
                               std::to_string(options_.max_pending_per_connection) +
                               " calls pending on one connection");
  }
  const std::string why = LastError();
  return Status::Unavailable("not connected to Redis at " + Address() +
                             (why.empty() ? "" : ": " + why));
}

void Connection::Enqueue(const std::string& bytes, std::vector<Pending>& entries)
    SLUICE_EXCLUDES(mu_) {
  base::MutexLock lock(mu_);
  EnqueueLocked(bytes, entries);
}

// Keeps the deadlines of the entries not marked out_of_order nondecreasing along the FIFO, as
// ExpireCalls assumes: an entry stamped earlier than one already queued (its caller was
// preempted between stamping and queueing) is marked.
void Connection::EnqueueLocked(const std::string& bytes, std::vector<Pending>& entries)
    SLUICE_REQUIRES(mu_) {
  CloseGroupLocked();  // it goes first: checks keep their order
  outgoing_.append(bytes);
  for (auto& e : entries) AddEntryLocked(std::move(e));
  PostFlushLocked();
}

void Connection::AddEntryLocked(Pending e) SLUICE_REQUIRES(mu_) {
  if (e.queued_at == Steady::time_point{}) e.queued_at = Steady::now();
  if (!e.out_of_order && !e.finished) {
    if (e.deadline < last_in_order_deadline_) {
      e.out_of_order = true;
    } else {
      last_in_order_deadline_ = e.deadline;
    }
  }
  incoming_.push_back(std::move(e));
}

void Connection::PostFlushLocked() SLUICE_REQUIRES(mu_) {
  if (flush_posted_) return;
  flush_posted_ = true;
  asio::post(io_, [this, self = shared_from_this()] { Flush(); });
}

std::string Connection::LastError() const {
  base::MutexLock lock(error_mu_);
  return last_error_;
}

// Moves every queued call into the in-flight queue at once, so its deadline is watched even
// while the bytes wait behind a write that does not complete (a hung server with full socket
// buffers); the bytes leave in one write as soon as none is in flight. The coalescing call
// stays while a write is in flight or coalesce_behind calls await their replies, until its hold
// limit or deadline (`let_go`) passes.
void Connection::Flush(std::optional<CoalescingGroup::Release> let_go) {
  std::vector<Pending> taken;
  bool write = false;
  bool connected = false;
  Steady::time_point group_due = Steady::time_point::max();
  {
    base::MutexLock lock(mu_);
    flush_posted_ = false;
    connected = connected_;
    // Those queued ahead of the call leave in this flush's write, before it.
    const bool replies_ahead = inflight_.size() + incoming_.size() >= hold_behind_;
    holding_ = false;
    if (let_go || !connected || (!writing_active_ && !replies_ahead)) {
      CloseGroupLocked(let_go.value_or(CoalescingGroup::Release::kOther));
    } else if (!group_.empty() && !writing_active_) {
      holding_ = true;
      group_.HoldBehindReplies(Steady::now());
    }
    if (!group_.empty()) group_due = std::min(group_.hold_limit(), group_.deadline());
    taken.swap(incoming_);
    if (!connected) {
      outgoing_.clear();
    } else if (!writing_active_) {
      writing_.swap(outgoing_);
      write = !writing_.empty();
    }
  }
  if (!connected) {
    FailAll(taken, Status::Unavailable("connection to Redis at " + Address() + " lost"));
    return;
  }
  Steady::time_point earliest = group_due;
  for (auto& p : taken) {
    if (!p.finished) earliest = std::min(earliest, p.deadline);
    if (p.out_of_order) ++out_of_order_in_flight_;
    inflight_.push_back(std::move(p));
  }
  unsent_ += taken.size();
  commands_.fetch_add(taken.size(), std::memory_order_relaxed);
  ArmDeadlineTimer(earliest);
  if (write) Write();
}

void Connection::Write() {
  writing_active_ = true;
  write_started_ = Steady::now();
  for (size_t i = inflight_.size() - std::min(unsent_, inflight_.size()); i < inflight_.size();
       ++i) {
    Pending& p = inflight_[i];
    p.sent_at =
        write_started_ > p.hold_counts_by ? write_started_ : std::min(p.sent_at, write_started_);
  }
  unsent_ = 0;
  writes_.fetch_add(1, std::memory_order_relaxed);
  transport_.AsyncWrite(
      asio::buffer(writing_),
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec, size_t) {
        if (gen != generation_) return;
        if (ec) return WriteFailed(ec);  // writing_active_ stays: no more
        writing_active_ = false;
        writing_.clear();
        Flush();
      });
}

void Connection::Read() {
  transport_.AsyncReadSome(
      asio::buffer(read_buffer_),
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec, size_t n) {
        if (gen != generation_) return;
        if (ec) return ReadFailed(ec);
        last_read_ = Steady::now();
        if (!reader_->Feed(read_buffer_.data(), n)) return Disconnect("bad reply from Redis");
        while (true) {
          Result<std::optional<Reply>> reply = reader_->Next();
          if (!reply.ok()) return Disconnect("bad reply from Redis");
          if (!reply->has_value()) break;
          if (inflight_.empty()) return Disconnect("reply from Redis without a request");
          Pending entry = std::move(inflight_.front());
          inflight_.pop_front();
          HandleReply(entry, std::move(**reply));
          if (gen != generation_) return;  // the reply's handler dropped the connection
        }
        if (holding_ && inflight_.size() < hold_behind_) {
          // The held call leaves after the handlers already queued on this thread, so that the
          // checks of the requests they read join it rather than the call after.
          base::MutexLock lock(mu_);
          PostFlushLocked();
        }
        bool expire = false;
        if (expire_after_read_) {
          bytes_at_hand_ -= std::min(bytes_at_hand_, n);
          expire = bytes_at_hand_ == 0;
        }
        Read();
        if (expire) ExpireAfterReads();
      });
}

// A write fails once the server has gone, often after it said why (a TLS alert such as
// "certificate required", an error reply): the socket is shut so that the read pending on it
// takes what the server sent, and the read drops the connection.
void Connection::WriteFailed(const boost::system::error_code& ec) {
  write_failure_ = "write failed: " + Transport::Reason(ec);
  transport_.Shutdown();
}

void Connection::ReadFailed(const boost::system::error_code& ec) {
  if (!write_failure_.empty() && !Transport::IsAlert(ec)) return Disconnect(write_failure_);
  Disconnect(ec == asio::error::eof ? "Redis closed the connection"
                                    : "read failed: " + Transport::Reason(ec));
}

// Frees the entry's pending slots before its callback runs (a coalesced call's, each before its
// member's answer), unless it is re-sent.
void Connection::HandleReply(Pending& entry, Reply reply) {
  if (entry.out_of_order) --out_of_order_in_flight_;
  const bool noscript = reply.is_error() && reply.str.starts_with("NOSCRIPT");
  if (entry.kind == Pending::Kind::kEval && noscript && !entry.resent && !entry.finished) {
    return Resend(std::move(entry));
  }
  if (entry.kind == Pending::Kind::kScriptLoad) loading_.pop_front();  // loads answer in order
  if (!entry.members.empty() && !entry.finished) return AnswerMembers(entry, std::move(reply));
  pending_.fetch_sub(entry.slots(), std::memory_order_relaxed);
  if (entry.kind == Pending::Kind::kIgnoreReply || entry.finished) return;
  entry.done(std::move(reply));
}

// Each member's slot is freed just before its answer, not all of them before the first: a caller
// answered may queue its next check at once, and the checks the connection has taken and not yet
// answered stay within max_pending_per_connection.
void Connection::AnswerMembers(Pending& call, Reply reply) {
  auto& members = call.members;
  const size_t fields = CoalescedReplyFields(reply, members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    pending_.fetch_sub(1, std::memory_order_relaxed);
    if (members[i].finished) continue;
    if (fields > 0) {
      members[i].done(TakeCoalescedReply(reply, i, members.size(), fields));
    } else if (reply.is_error()) {
      members[i].done(reply);
    } else {
      members[i].done(Status::Internal("unexpected reply to " + std::to_string(members.size()) +
                                       " coalesced checks from Redis at " + Address()));
    }
  }
}

// The same EVALSHA again, in its pending slot, behind what is already queued: after a SCRIPT
// LOAD of its script unless one is outstanding, and after ASKING if it had one. The load and
// ASKING go beyond max_pending: at most one load per script, and ASKING only on a call Redis
// Cluster redirected.
void Connection::Resend(Pending entry) {
  std::string bytes;
  std::vector<Pending> entries;
  const std::string& sha1 = entry.script->sha1;
  if (std::find(loading_.begin(), loading_.end(), sha1) == loading_.end()) {
    const std::string_view load[] = {"SCRIPT", "LOAD", entry.script->source};
    AppendCommand(load, bytes);
    entries.push_back(IgnoredReply(entry.deadline, Pending::Kind::kScriptLoad));
    loading_.push_back(sha1);
  }
  if (entry.asking) {
    AppendCommand(kAsking, bytes);
    entries.push_back(IgnoredReply(entry.deadline));
  }
  bytes.append(entry.command);
  entry.resent = true;
  entry.out_of_order = true;
  entries.push_back(std::move(entry));
  pending_.fetch_add(entries.size() - 1, std::memory_order_relaxed);
  Enqueue(bytes, entries);
}

ClientStats Connection::stats() const {
  return ClientStats{.commands = commands_.load(std::memory_order_relaxed),
                     .writes = writes_.load(std::memory_order_relaxed),
                     .connects = connects_.load(std::memory_order_relaxed)};
}

}  // namespace sluice::redis
