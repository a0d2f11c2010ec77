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
// scan.
//
// NOSCRIPT (the script cache was flushed, or Redis restarted): the call is sent again in the
// pending slot it had, behind one SCRIPT LOAD of its script per connection, shared by every call
// that gets NOSCRIPT while that load is outstanding: Redis answers a connection in order, so an
// EVALSHA written after the SCRIPT LOAD finds the script.
#include "redis/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <functional>

#include "redis/backoff.h"

namespace sluice::redis {

Pending IgnoredReply(Steady::time_point deadline, Pending::Kind kind) {
  Pending p;
  p.kind = kind;
  p.deadline = deadline;
  p.finished = true;
  return p;
}

bool IsMasterRole(const Reply& role) {
  return role.type == Reply::Type::kArray && !role.elements.empty() &&
         role.elements[0].str == "master";
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
        writing_active_ = false;
        writing_.clear();
        if (ec) return Disconnect("write failed: " + Transport::Reason(ec));
        Flush();
      });
}

void Connection::Read() {
  transport_.AsyncReadSome(
      asio::buffer(read_buffer_),
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec, size_t n) {
        if (gen != generation_) return;
        if (ec) {
          return Disconnect(ec == asio::error::eof ? "Redis closed the connection"
                                                   : "read failed: " + Transport::Reason(ec));
        }
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
        if (holding_ && inflight_.size() < hold_behind_) Flush();  // the held call leaves
        bool expire = false;
        if (expire_after_read_) {
          bytes_at_hand_ -= std::min(bytes_at_hand_, n);
          expire = bytes_at_hand_ == 0;
        }
        Read();
        if (expire) ExpireAfterReads();
      });
}

// Frees the entry's pending slot, before its callback runs, unless it is re-sent.
void Connection::HandleReply(Pending& entry, Reply reply) {
  if (entry.out_of_order) --out_of_order_in_flight_;
  const bool noscript = reply.is_error() && reply.str.starts_with("NOSCRIPT");
  if (entry.kind == Pending::Kind::kEval && noscript && !entry.resent && !entry.finished) {
    return Resend(std::move(entry));
  }
  pending_.fetch_sub(entry.slots(), std::memory_order_relaxed);
  if (entry.kind == Pending::Kind::kScriptLoad) loading_.pop_front();  // loads answer in order
  if (entry.kind == Pending::Kind::kIgnoreReply || entry.finished) return;
  if (!entry.members.empty()) return AnswerMembers(entry, std::move(reply));
  entry.done(std::move(reply));
}

void Connection::AnswerMembers(Pending& call, Reply reply) {
  auto& members = call.members;
  if (const size_t fields = CoalescedReplyFields(reply, members.size()); fields > 0) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].finished) continue;
      members[i].done(TakeCoalescedReply(reply, i, members.size(), fields));
    }
    return;
  }
  for (auto& m : members) {
    if (m.finished) continue;
    if (reply.is_error()) {
      m.done(reply);
    } else {
      m.done(Status::Internal("unexpected reply to " + std::to_string(members.size()) +
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

// Makes the timer fire by `at` (or keeps it firing earlier).
void Connection::ArmDeadlineTimer(Steady::time_point at) {
  if (at == Steady::time_point::max() || (timer_armed_ && timer_at_ <= at)) return;
  timer_armed_ = true;
  timer_at_ = at;
  deadline_timer_.expires_at(at);  // a wait armed for later completes as aborted and is ignored
  deadline_timer_.async_wait(
      [this, self = shared_from_this(), gen = ++timer_generation_](boost::system::error_code ec) {
        if (gen != timer_generation_) return;
        timer_armed_ = false;
        if (ec || stopping_) return;
        ExpireCalls();
      });
}

Status Connection::DeadlineStatus() const {
  return Status::DeadlineExceeded("no reply from Redis at " + Address() + " within " +
                                  std::to_string(options_.timeout.count() / 1000) + " ms");
}

Status Connection::ExpiredStatus(const Pending& call, Steady::time_point deadline,
                                 Steady::time_point now) const {
  const auto half = (deadline - call.queued_at) / 2;
  // A deadline that passed before the call was queued (its caller stalled) is this process's.
  const bool queued_in_time = half > Steady::duration::zero();
  const bool redis_had_it = queued_in_time && call.sent_at != Steady::time_point::max() &&
                            call.sent_at + half <= deadline;
  // Redis neither reads what this connection writes nor answers anything.
  const bool write_not_taken =
      queued_in_time && writing_active_ && write_started_ + half <= now && last_read_ + half <= now;
  if (redis_had_it || write_not_taken) return DeadlineStatus();
  return Status::ResourceExhausted(
      "the check waited in this process's own queue to Redis at " + Address() +
      " for more than half the time to its deadline: this instance is overloaded (not Redis); "
      "retry later");
}

void Connection::ExpireMembers(Pending& call, Steady::time_point now, Steady::time_point& next) {
  Steady::time_point earliest = Steady::time_point::max();
  for (auto& m : call.members) {
    if (m.finished) continue;
    if (m.deadline > now) {
      earliest = std::min(earliest, m.deadline);
      continue;
    }
    m.finished = true;
    m.done(ExpiredStatus(call, m.deadline, now));
  }
  call.finished = earliest == Steady::time_point::max();
  if (!call.finished) call.deadline = earliest;
  next = std::min(next, earliest);
}

// Deferred (asio::defer: behind the handlers already queued on this thread, among them a read's
// completion whose bytes Read() took at once), so that the replies read by then are answered
// first.
void Connection::ExpireAfterReads() {
  asio::defer(io_, [this, self = shared_from_this(), gen = generation_] {
    if (gen == generation_ && !stopping_) ExpireCalls(/*replies_read=*/true);
  });
}

void Connection::ExpireCalls(bool replies_read) {
  const auto now = Steady::now();
  if (!replies_read && !expire_after_read_ && ConnectedOnIoThread()) {
    boost::system::error_code ec;
    const size_t at_hand = transport_.socket().available(ec);
    if (!ec && at_hand > 0) {
      // The read handler reads them and calls back; the timer only if it does not.
      expire_after_read_ = true;
      bytes_at_hand_ = at_hand;
      return ArmDeadlineTimer(now + options_.timeout);
    }
    return ExpireAfterReads();
  }
  expire_after_read_ = false;
  std::optional<CoalescingGroup::Release> let_go;
  // When the coalescing call is let go while it is held.
  Steady::time_point next = Steady::time_point::max();
  {
    base::MutexLock lock(mu_);
    if (!group_.empty() && group_.deadline() <= now) {
      let_go = CoalescingGroup::Release::kAtDeadline;
    } else if (!group_.empty() && group_.hold_limit() <= now) {
      let_go = CoalescingGroup::Release::kOther;
    } else if (!group_.empty()) {
      next = group_.hold_limit();
    }
  }
  if (let_go) Flush(let_go);  // into inflight_, where its checks expire
  for (auto& p : inflight_) {
    if (p.finished) continue;
    if (!p.members.empty()) {
      ExpireMembers(p, now, next);
      continue;
    }
    if (p.deadline > now) {
      next = std::min(next, p.deadline);
      if (out_of_order_in_flight_ == 0) break;  // deadlines grow along the queue but for these
      continue;
    }
    p.finished = true;
    p.done(ExpiredStatus(p, p.deadline, now));
  }
  if (inflight_.empty()) return ArmDeadlineTimer(next);
  // Hung: the oldest call is past its deadline and nothing was read for hang_timeout since.
  const auto hung_at = std::max(last_read_, inflight_.front().deadline) + options_.hang_timeout;
  if (hung_at <= now) {
    return Disconnect("Redis did not answer for " +
                      std::to_string(options_.hang_timeout.count() / 1000) + " ms");
  }
  ArmDeadlineTimer(std::min(next, hung_at));
}

void Connection::Connect() {
  if (stopping_) return;
  ++generation_;
  transport_.Close();
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait(
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec) {
        if (ec || gen != generation_ || ConnectedOnIoThread()) return;
        resolver_.cancel();
        transport_.Close();
      });
  if (!options_.unix_path.empty()) {
    return ConnectTo({Endpoint(asio::local::stream_protocol::endpoint(options_.unix_path))});
  }
  resolver_.async_resolve(
      options_.host, std::to_string(options_.port),
      [this, self = shared_from_this(), gen = generation_](
          boost::system::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (gen != generation_) return;
        if (ec) return ConnectFailed("cannot resolve " + options_.host + ": " + ec.message());
        std::vector<Endpoint> endpoints;
        for (const auto& r : results) endpoints.emplace_back(r.endpoint());
        ConnectTo(std::move(endpoints));
      });
}

void Connection::ConnectTo(std::vector<Endpoint> endpoints, size_t next) {
  if (next >= endpoints.size()) return ConnectFailed("cannot connect to " + Address());
  transport_.Reset(options_.tls.get(), options_.tls_server_name);
  transport_.socket().async_connect(
      endpoints[next], [this, self = shared_from_this(), gen = generation_, endpoints,
                        next](boost::system::error_code ec) mutable {
        if (gen != generation_) return;
        if (ec == asio::error::operation_aborted) {
          return ConnectFailed("connecting to " + Address() + " timed out");
        }
        if (ec) return ConnectTo(std::move(endpoints), next + 1);
        Secure();
      });
}

void Connection::Secure() {
  if (options_.unix_path.empty()) {
    const int one = 1;
    setsockopt(transport_.socket().native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (!transport_.tls()) return Connected();
  transport_.AsyncHandshake(
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec) {
        if (gen != generation_) return;
        if (ec == asio::error::operation_aborted) {
          return ConnectFailed("TLS handshake with " + Address() + " timed out");
        }
        if (ec) return ConnectFailed(transport_.HandshakeError(ec));
        Connected();
      });
}

void Connection::Connected() {
  {
    base::MutexLock lock(mu_);
    connected_ = true;
  }
  last_read_ = Steady::now();
  Read();
  Handshake();
}

// AUTH, SELECT and a PING, before any caller's command; ready once all have answered.
void Connection::Handshake() {
  std::vector<std::vector<std::string_view>> commands;
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      commands.push_back({"AUTH", options_.password});
    } else {
      commands.push_back({"AUTH", options_.user, options_.password});
    }
  }
  const std::string db = std::to_string(options_.db);
  if (options_.db != 0) commands.push_back({"SELECT", db});
  if (options_.require_master) commands.push_back({"ROLE"});
  commands.push_back({"PING"});

  std::string bytes;
  std::vector<Pending> entries(commands.size());
  const auto deadline = Steady::now() + options_.connect_timeout;
  auto failed = std::make_shared<bool>(false);
  for (size_t i = 0; i < commands.size(); ++i) {
    AppendCommand(commands[i], bytes);
    entries[i].deadline = deadline;
    entries[i].out_of_order = true;  // connect_timeout's deadline, not in the calls' order
    entries[i].done = [this, failed, gen = generation_, last = i + 1 == commands.size(),
                       what = std::string(commands[i][0])](Result<Reply> r) {
      if (gen != generation_ || *failed) return;
      const bool not_master = what == "ROLE" && r.ok() && !IsMasterRole(*r);
      if (!r.ok() || r->is_error() || not_master) {
        *failed = true;
        const std::string why = not_master ? "the server is not a master (a replica now?)"
                                : r.ok()   ? r->str
                                           : r.status().message();
        // Not from inside the reply loop: drop the connection on the next turn.
        asio::post(io_, [this, self = shared_from_this(), gen, why, what] {
          if (gen == generation_) Disconnect(what + " failed: " + why);
        });
        return;
      }
      if (last) {
        backoff_ = options_.reconnect_min;
        connects_.fetch_add(1, std::memory_order_relaxed);
        base::MutexLock lock(mu_);  // see Submit
        ready_.store(true, std::memory_order_release);
      }
    };
  }
  pending_.fetch_add(entries.size(), std::memory_order_relaxed);
  Enqueue(bytes, entries);
}

void Connection::ConnectFailed(const std::string& why) {
  SetError(why);
  connect_timer_.cancel();
  transport_.Close();
  ScheduleReconnect();
}

void Connection::Disconnect(const std::string& why) {
  SetError(why);
  Drop(Status::Unavailable("connection to Redis at " + Address() + " lost: " + why));
  ScheduleReconnect();
}

// Closes the socket and fails every call that has not been answered.
void Connection::Drop(const Status& status) {
  ++generation_;
  transport_.Close();
  reader_ = std::make_unique<ReplyReader>();
  writing_active_ = false;
  writing_.clear();
  unsent_ = 0;
  holding_ = false;
  expire_after_read_ = false;
  out_of_order_in_flight_ = 0;
  loading_.clear();
  std::vector<Pending> taken;
  {
    base::MutexLock lock(mu_);
    ready_.store(false, std::memory_order_release);  // see Submit
    connected_ = false;
    CloseGroupLocked();
    taken.swap(incoming_);
    outgoing_.clear();
  }
  for (auto& p : inflight_) taken.push_back(std::move(p));
  inflight_.clear();
  FailAll(taken, status);
}

void Connection::FailAll(std::vector<Pending>& entries, const Status& status) {
  size_t slots = 0;
  for (const auto& p : entries) slots += p.slots();
  pending_.fetch_sub(slots, std::memory_order_relaxed);
  for (auto& p : entries) {
    if (p.finished || p.kind == Pending::Kind::kIgnoreReply) continue;
    if (p.members.empty()) {
      p.done(status);
      continue;
    }
    for (auto& m : p.members) {
      if (!m.finished) m.done(status);
    }
  }
}

void Connection::ScheduleReconnect() {
  if (stopping_) return;
  const ReconnectWait wait =
      NextReconnectWait(backoff_, options_.reconnect_min, options_.reconnect_max, jitter_);
  reconnect_timer_.expires_after(wait.delay);
  backoff_ = wait.backoff;
  reconnect_timer_.async_wait([this, self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) Connect();
  });
}

void Connection::SetError(const std::string& why) {
  base::MutexLock lock(error_mu_);
  last_error_ = why;
}
ClientStats Connection::stats() const {
  return ClientStats{.commands = commands_.load(std::memory_order_relaxed),
                     .writes = writes_.load(std::memory_order_relaxed),
                     .connects = connects_.load(std::memory_order_relaxed)};
}

}  // namespace sluice::redis
