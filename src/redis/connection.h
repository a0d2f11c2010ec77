// Connection: one multiplexed, auto-pipelined connection to one Redis, owned by an I/O thread of
// AsioClient (client.cc): its state machine (connecting, handshake, ready, dropped, reconnecting
// with backoff), the calls' deadlines, and EVALSHA's recovery from NOSCRIPT. The design notes are
// at the top of connection.cc.
//
// Thread safety: Submit, ready, pending and stats may be called from any thread; everything else
// runs on the connection's I/O thread.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "redis/client_options.h"
#include "redis/coalescing_group.h"
#include "redis/resp.h"
#include "redis/script_call.h"
#include "redis/transport.h"

namespace sluice::redis {

using Steady = std::chrono::steady_clock;
namespace asio = boost::asio;

struct Pending {
  // kIgnoreReply: a command sent for its effect on the next one (ASKING). kScriptLoad: a SCRIPT
  // LOAD sent after NOSCRIPT; its reply too is ignored, but ends the load.
  enum class Kind : uint8_t { kCall, kEval, kIgnoreReply, kScriptLoad };
  ReplyCallback done;
  Steady::time_point deadline;
  Kind kind = Kind::kCall;
  bool finished = false;           // the callback ran (deadline passed)
  bool resent = false;             // a kEval sent again after NOSCRIPT
  bool out_of_order = false;       // its deadline is outside the FIFO order (see ExpireCalls)
  bool asking = false;             // kEval: ASKING goes before it, again if it is re-sent
  const Script* script = nullptr;  // kEval
  std::string command;             // kEval: the EVALSHA bytes, to send again after NOSCRIPT
  // A coalesced call of several checks, each answered in `members` and not by `done`; out of
  // order, its deadline is its members' earliest not yet passed, and it is finished once they
  // all are.
  std::vector<CoalescedMember> members;
  // When it was queued on the connection (a coalesced call: its first check), and when the write
  // carrying its bytes started (max until then; a coalesced call held behind calls awaiting
  // their replies: CoalescingGroup::Call::sent_at): Connection::ExpiredStatus.
  Steady::time_point queued_at{};
  Steady::time_point sent_at = Steady::time_point::max();
  Steady::time_point hold_counts_by = Steady::time_point::max();  // CoalescingGroup::Call's

  size_t slots() const { return members.empty() ? 1 : members.size(); }
};

inline constexpr std::string_view kAsking[] = {"ASKING"};

// An entry whose reply no caller waits for.
Pending IgnoredReply(Steady::time_point deadline, Pending::Kind kind = Pending::Kind::kIgnoreReply);

// "host:port", or the socket's path.
std::string ServerAddress(const ClientOptions& options);

// Whether a reply to ROLE says the server is a master.
bool IsMasterRole(const Reply& role);

// Owned by shared_ptr: every handler it gives the io_context holds it, so it outlives its
// client until its last handler has run (the io_context may be shared with other clients and
// keep running, see io_threads.h).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `io` must outlive the connection; `index` seeds its reconnection jitter.
  Connection(asio::io_context& io, ClientOptions options, int index);

  void Start();

  // On any thread. Fails the entries inline when they can't be taken. Admission and queueing
  // happen under one lock, and the connection becomes ready or stops being ready under that lock
  // too, so a call admitted on a connection that then drops can never be written on the next one
  // ahead of its AUTH and SELECT.
  void Submit(std::string bytes, std::vector<Pending> entries);
  // The same for checks, which join the call at the tail of the queue, in order, one by one:
  // each joins that call when it is one of the same script and layout
  // (CoalescibleCall::across_slots) with room left (and its last run when it shares that run's
  // args), and otherwise starts one there. The call takes no more once anything else is queued
  // behind it, it leaves (no write in flight and fewer than coalesce_behind of the connection's
  // calls awaiting replies, see client_options.h), or a deadline of its checks passes. A check
  // alone goes by the same script (CloseGroupLocked says why). All are admitted or refused
  // together.
  void SubmitCoalesced(std::span<CoalescedCheck> checks);
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // OK when ready, else what a call submitted now would fail with.
  Status ReadyStatus() const { return ready() ? Status::Ok() : Refuse(Refusal::kNotConnected); }
  size_t pending() const { return pending_.load(std::memory_order_relaxed); }

  // On the I/O thread, at shutdown.
  void Shutdown();
  ClientStats stats() const;

 private:
  using Endpoint = asio::generic::stream_protocol::endpoint;
  enum class Refusal { kNone, kNotConnected, kTooManyPending };
  Refusal Admit(size_t n) SLUICE_REQUIRES(mu_);
  Status Refuse(Refusal refusal) const;
  void Enqueue(const std::string& bytes, std::vector<Pending>& entries) SLUICE_EXCLUDES(mu_);

  // Keeps the deadlines of the entries not marked out_of_order nondecreasing along the FIFO, as
  // ExpireCalls assumes: an entry stamped earlier than one already queued (its caller was
  // preempted between stamping and queueing) is marked.
  void EnqueueLocked(const std::string& bytes, std::vector<Pending>& entries) SLUICE_REQUIRES(mu_);
  void AddEntryLocked(Pending entry) SLUICE_REQUIRES(mu_);
  void PostFlushLocked() SLUICE_REQUIRES(mu_);
  // Adds the check to the coalescing call, or starts one with it.
  void JoinGroupLocked(CoalescedCheck& check) SLUICE_REQUIRES(mu_);
  // Queues the coalescing call, if any, as an entry and its bytes.
  void CloseGroupLocked(CoalescingGroup::Release release = CoalescingGroup::Release::kOther)
      SLUICE_REQUIRES(mu_);
  std::string Address() const { return ServerAddress(options_); }

  std::string LastError() const;

  // --- I/O thread from here on ---

  // Moves every queued call into the in-flight queue at once, so its deadline is watched even
  // while the bytes wait behind a write that does not complete (a hung server with full socket
  // buffers); the bytes leave in one write as soon as none is in flight. The coalescing call
  // stays while a write is in flight or coalesce_behind calls await their replies, until its hold
  // limit or deadline (`let_go`) passes.
  void Flush(std::optional<CoalescingGroup::Release> let_go = std::nullopt);
  void Write();
  void Read();
  void WriteFailed(const boost::system::error_code& ec);
  void ReadFailed(const boost::system::error_code& ec);

  // Frees the entry's pending slot, before its callback runs, unless it is re-sent.
  void HandleReply(Pending& entry, Reply reply);

  // The same EVALSHA again, in its pending slot, behind what is already queued: after a SCRIPT
  // LOAD of its script unless one is outstanding, and after ASKING if it had one. The load and
  // ASKING go beyond max_pending: at most one load per script, and ASKING only on a call Redis
  // Cluster redirected.
  void Resend(Pending entry);

  // Makes the timer fire by `at` (or keeps it firing earlier).
  void ArmDeadlineTimer(Steady::time_point at);
  // Fails the calls whose deadlines passed. Replies already at hand on the socket are read first
  // (`replies_read` once they are), so a call Redis answered in time is not failed because this
  // process was late to read it.
  void ExpireCalls(bool replies_read = false);
  // ExpireCalls once the read completions queued on this thread have run.
  void ExpireAfterReads();
  // Answers the members of a coalesced call whose deadlines passed, and finds the next one.
  void ExpireMembers(Pending& call, Steady::time_point now, Steady::time_point& next);
  // Gives each member its part of the call's flat reply (as many elements each, an array of them),
  // and an error reply to the call to every one.
  void AnswerMembers(Pending& call, Reply reply);
  Status DeadlineStatus() const;
  // What a call whose deadline passed is answered: DEADLINE_EXCEEDED, an outage, when Redis had
  // its bytes for at least half its time (from queued to deadline), or a write Redis does not
  // take held them back that long while it answered nothing; otherwise it waited in this process
  // (the I/O thread, the write ahead, the coalescing call but for the time it was held behind
  // calls Redis had not answered) and is refused RESOURCE_EXHAUSTED, which
  // no breaker counts and no failure policy decides.
  Status ExpiredStatus(const Pending& call, Steady::time_point deadline,
                       Steady::time_point now) const;
  void Connect();
  void ConnectTo(std::vector<Endpoint> endpoints, size_t next = 0);
  // The TLS handshake, if any, within the connect deadline; then Connected.
  void Secure();
  void Connected();

  // AUTH, SELECT and a PING, before any caller's command; ready once all have answered.
  void Handshake();
  void ConnectFailed(const std::string& why);
  void Disconnect(const std::string& why);

  // Closes the socket and fails every call that has not been answered.
  void Drop(const Status& status);
  void FailAll(std::vector<Pending>& entries, const Status& status);
  void ScheduleReconnect();

  // Only the I/O thread writes connected_, so there it reads it without the lock.
  bool ConnectedOnIoThread() const SLUICE_NO_THREAD_SAFETY_ANALYSIS { return connected_; }

  void SetError(const std::string& why);
  asio::io_context& io_;
  const ClientOptions options_;
  Transport transport_;
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer deadline_timer_, reconnect_timer_, connect_timer_;
  std::unique_ptr<ReplyReader> reader_;
  const size_t hold_behind_;  // ClientOptions::coalesce_behind, resolved
  std::array<char, 16 * 1024> read_buffer_;
  base::Mutex mu_;
  std::string outgoing_ SLUICE_GUARDED_BY(mu_);
  std::vector<Pending> incoming_ SLUICE_GUARDED_BY(mu_);
  bool flush_posted_ SLUICE_GUARDED_BY(mu_) = false;
  // The call coalescing checks at the tail of the queue.
  CoalescingGroup group_ SLUICE_GUARDED_BY(mu_);
  bool connected_ SLUICE_GUARDED_BY(mu_) =
      false;  // written on the I/O thread (ConnectedOnIoThread)
  Steady::time_point last_in_order_deadline_ SLUICE_GUARDED_BY(mu_){};
  std::atomic<uint64_t> commands_{0}, writes_{0}, connects_{0};
  std::atomic<bool> ready_{false};  // written under mu_ (see Submit)
  std::atomic<size_t> pending_{0};  // accepted and not yet answered or failed
  mutable base::Mutex error_mu_;
  std::string last_error_ SLUICE_GUARDED_BY(error_mu_);

  // I/O thread only.
  std::deque<Pending> inflight_;
  std::string writing_;
  bool writing_active_ = false;
  std::string write_failure_;  // set when a write failed; the pending read then drops
  Steady::time_point write_started_{};
  size_t unsent_ = 0;     // the calls at the tail of inflight_ whose bytes no write took yet
  bool holding_ = false;  // the coalescing call waits for replies to calls ahead (Flush)
  // Set when a deadline came with replies at hand, bytes_at_hand_ of them: the expiry waits until
  // they are read.
  bool expire_after_read_ = false;
  size_t bytes_at_hand_ = 0;
  bool timer_armed_ = false;
  Steady::time_point timer_at_{};
  uint64_t timer_generation_ = 0;
  bool stopping_ = false;
  int out_of_order_in_flight_ = 0;
  std::deque<std::string> loading_;  // SHA1s of the SCRIPT LOADs in flight, in order
  uint64_t generation_ = 0;          // bumped per connection attempt; stale handlers see a mismatch
  Steady::time_point last_read_{};
  Duration backoff_;
  std::mt19937_64 jitter_;
};

}  // namespace sluice::redis
