// Design notes.
//
// Each connection lives on one I/O thread (one io_context per thread), so its socket, reader and
// in-flight queue need no lock. Callers on any thread format their command (hiredis) and append
// the bytes and a Pending entry to the connection's outgoing buffer under a short mutex; the
// first appender posts one flush. The flush moves everything accumulated into a single write,
// and whatever arrives while that write is in flight leaves in the next one: that is the
// auto-pipelining. Replies come back in order, so the in-flight queue is FIFO.
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
#include "redis/client.h"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/uuid/detail/sha1.hpp>
#include <cstdio>
#include <deque>
#include <future>
#include <random>
#include <thread>

#include "core/await.h"
#include "core/mutex.h"
#include "redis/backoff.h"
#include "redis/reply_gather.h"

namespace sluice::redis {
namespace {

namespace asio = boost::asio;
using Steady = std::chrono::steady_clock;
using Socket = asio::generic::stream_protocol::socket;
using Endpoint = asio::generic::stream_protocol::endpoint;

Reply ToReply(const redisReply* r) {
  Reply reply;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      reply.type = Reply::Type::kString;
      reply.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      reply.type = Reply::Type::kStatus;
      reply.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      reply.type = Reply::Type::kError;
      reply.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      reply.type = Reply::Type::kInteger;
      reply.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      reply.type = Reply::Type::kArray;
      reply.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) reply.elements.push_back(ToReply(r->element[i]));
      break;
    default:
      reply.type = Reply::Type::kNil;
  }
  return reply;
}

// Appends one command in RESP to `out`.
void AppendCommand(std::span<const std::string_view> argv, std::string& out) {
  constexpr size_t kInline = 24;
  const char* parts_inline[kInline];
  size_t lens_inline[kInline];
  std::vector<const char*> parts_heap;
  std::vector<size_t> lens_heap;
  const char** parts = parts_inline;
  size_t* lens = lens_inline;
  if (argv.size() > kInline) {
    parts_heap.resize(argv.size());
    lens_heap.resize(argv.size());
    parts = parts_heap.data();
    lens = lens_heap.data();
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    parts[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  char* formatted = nullptr;
  const int n = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), parts, lens);
  if (n > 0) out.append(formatted, static_cast<size_t>(n));
  redisFreeCommand(formatted);
}

void AppendEvalSha(const ScriptCall& call, std::string& out) {
  char numkeys[24];
  const int len = std::snprintf(numkeys, sizeof numkeys, "%zu", call.keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + call.keys.size() + call.args.size());
  argv.push_back("EVALSHA");
  argv.push_back(call.script->sha1);
  argv.emplace_back(numkeys, static_cast<size_t>(len));
  argv.insert(argv.end(), call.keys.begin(), call.keys.end());
  argv.insert(argv.end(), call.args.begin(), call.args.end());
  AppendCommand(argv, out);
}

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
};

constexpr std::string_view kAsking[] = {"ASKING"};

// An entry whose reply no caller waits for.
Pending IgnoredReply(Steady::time_point deadline,
                     Pending::Kind kind = Pending::Kind::kIgnoreReply) {
  Pending p;
  p.kind = kind;
  p.deadline = deadline;
  p.finished = true;
  return p;
}

// "host:port", or the socket's path.
std::string ServerAddress(const ClientOptions& options) {
  return options.unix_path.empty() ? options.host + ":" + std::to_string(options.port)
                                   : options.unix_path;
}

class Connection {
 public:
  Connection(asio::io_context& io, const ClientOptions& options, int index)
      : io_(io),
        options_(options),
        socket_(io),
        resolver_(io),
        deadline_timer_(io),
        reconnect_timer_(io),
        connect_timer_(io),
        reader_(redisReaderCreate()),
        backoff_(options.reconnect_min),
        jitter_(static_cast<uint32_t>(std::random_device{}() + index)) {}

  ~Connection() { redisReaderFree(reader_); }

  void Start() {
    asio::post(io_, [this] { Connect(); });
  }

  // On any thread. Fails the entries inline when they can't be taken. Admission and queueing
  // happen under one lock, and the connection becomes ready or stops being ready under that lock
  // too, so a call admitted on a connection that then drops can never be written on the next one
  // ahead of its AUTH and SELECT.
  void Submit(std::string bytes, std::vector<Pending> entries) {
    Refusal refusal;
    {
      core::MutexLock lock(mu_);
      refusal = Admit(entries.size());
      if (refusal == Refusal::kNone) EnqueueLocked(bytes, entries);
    }
    if (refusal == Refusal::kNone) return;
    const Status status = Refuse(refusal);
    for (auto& e : entries) e.done(status);
  }

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  size_t pending() const { return pending_.load(std::memory_order_relaxed); }

  // On the I/O thread, at shutdown.
  void Shutdown() {
    stopping_ = true;
    resolver_.cancel();
    deadline_timer_.cancel();
    reconnect_timer_.cancel();
    connect_timer_.cancel();
    Drop(Status::Unavailable("Redis client shut down"));
  }

  std::atomic<uint64_t> commands{0}, writes{0}, connects{0};

 private:
  enum class Refusal { kNone, kNotConnected, kTooManyPending };

  Refusal Admit(size_t n) REQUIRES(mu_) {
    if (!ready()) return Refusal::kNotConnected;
    if (pending_.fetch_add(n, std::memory_order_relaxed) + n >
        options_.max_pending_per_connection) {
      pending_.fetch_sub(n, std::memory_order_relaxed);
      return Refusal::kTooManyPending;
    }
    return Refusal::kNone;
  }

  Status Refuse(Refusal refusal) const {
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

  void Enqueue(const std::string& bytes, std::vector<Pending>& entries) EXCLUDES(mu_) {
    core::MutexLock lock(mu_);
    EnqueueLocked(bytes, entries);
  }

  // Keeps the deadlines of the entries not marked out_of_order nondecreasing along the FIFO, as
  // ExpireCalls assumes: an entry stamped earlier than one already queued (its caller was
  // preempted between stamping and queueing) is marked.
  void EnqueueLocked(const std::string& bytes, std::vector<Pending>& entries) REQUIRES(mu_) {
    outgoing_.append(bytes);
    for (auto& e : entries) {
      if (!e.out_of_order && !e.finished) {
        if (e.deadline < last_in_order_deadline_) {
          e.out_of_order = true;
        } else {
          last_in_order_deadline_ = e.deadline;
        }
      }
      incoming_.push_back(std::move(e));
    }
    if (!flush_posted_) {
      flush_posted_ = true;
      asio::post(io_, [this] { Flush(); });
    }
  }

  std::string Address() const { return ServerAddress(options_); }

  std::string LastError() const {
    core::MutexLock lock(error_mu_);
    return last_error_;
  }

  // --- I/O thread from here on ---

  // Moves every queued call into the in-flight queue at once, so its deadline is watched even
  // while the bytes wait behind a write that does not complete (a hung server with full socket
  // buffers); the bytes leave in one write as soon as none is in flight.
  void Flush() {
    std::vector<Pending> taken;
    bool write = false;
    bool connected = false;
    {
      core::MutexLock lock(mu_);
      flush_posted_ = false;
      taken.swap(incoming_);
      connected = connected_;
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
    Steady::time_point earliest = Steady::time_point::max();
    for (auto& p : taken) {
      if (!p.finished) earliest = std::min(earliest, p.deadline);
      if (p.out_of_order) ++out_of_order_in_flight_;
      inflight_.push_back(std::move(p));
    }
    commands.fetch_add(taken.size(), std::memory_order_relaxed);
    ArmDeadlineTimer(earliest);
    if (write) Write();
  }

  void Write() {
    writing_active_ = true;
    writes.fetch_add(1, std::memory_order_relaxed);
    asio::async_write(socket_, asio::buffer(writing_),
                      [this, gen = generation_](boost::system::error_code ec, size_t) {
                        if (gen != generation_) return;
                        writing_active_ = false;
                        writing_.clear();
                        if (ec) return Disconnect("write failed: " + ec.message());
                        Flush();
                      });
  }

  void Read() {
    socket_.async_read_some(asio::buffer(read_buffer_),
                            [this, gen = generation_](boost::system::error_code ec, size_t n) {
                              if (gen != generation_) return;
                              if (ec)
                                return Disconnect(ec == asio::error::eof
                                                      ? "Redis closed the connection"
                                                      : "read failed: " + ec.message());
                              last_read_ = Steady::now();
                              if (redisReaderFeed(reader_, read_buffer_.data(), n) != REDIS_OK) {
                                return Disconnect("bad reply from Redis");
                              }
                              void* raw = nullptr;
                              while (true) {
                                if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
                                  return Disconnect("bad reply from Redis");
                                }
                                if (raw == nullptr) break;
                                auto* reply = static_cast<redisReply*>(raw);
                                if (inflight_.empty()) {
                                  freeReplyObject(reply);
                                  return Disconnect("reply from Redis without a request");
                                }
                                Pending entry = std::move(inflight_.front());
                                inflight_.pop_front();
                                HandleReply(entry, reply);
                                freeReplyObject(reply);
                                if (gen != generation_)
                                  return;  // the reply's handler dropped the connection
                              }
                              Read();
                            });
  }

  // Frees the entry's pending slot, before its callback runs, unless it is re-sent.
  void HandleReply(Pending& entry, const redisReply* reply) {
    if (entry.out_of_order) --out_of_order_in_flight_;
    const bool noscript = reply->type == REDIS_REPLY_ERROR &&
                          std::string_view(reply->str, reply->len).starts_with("NOSCRIPT");
    if (entry.kind == Pending::Kind::kEval && noscript && !entry.resent && !entry.finished) {
      return Resend(std::move(entry));
    }
    pending_.fetch_sub(1, std::memory_order_relaxed);
    if (entry.kind == Pending::Kind::kScriptLoad) loading_.pop_front();  // loads answer in order
    if (entry.kind == Pending::Kind::kIgnoreReply || entry.finished) return;
    entry.done(ToReply(reply));
  }

  // The same EVALSHA again, in its pending slot, behind what is already queued: after a SCRIPT
  // LOAD of its script unless one is outstanding, and after ASKING if it had one. The load and
  // ASKING go beyond max_pending: at most one load per script, and ASKING only on a call Redis
  // Cluster redirected.
  void Resend(Pending entry) {
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
  void ArmDeadlineTimer(Steady::time_point at) {
    if (at == Steady::time_point::max() || (timer_armed_ && timer_at_ <= at)) return;
    timer_armed_ = true;
    timer_at_ = at;
    deadline_timer_.expires_at(at);  // a wait armed for later completes as aborted and is ignored
    deadline_timer_.async_wait([this, gen = ++timer_generation_](boost::system::error_code ec) {
      if (gen != timer_generation_) return;
      timer_armed_ = false;
      if (ec || stopping_) return;
      ExpireCalls();
    });
  }

  void ExpireCalls() {
    const auto now = Steady::now();
    Steady::time_point next = Steady::time_point::max();
    for (auto& p : inflight_) {
      if (p.finished) continue;
      if (p.deadline > now) {
        next = std::min(next, p.deadline);
        if (out_of_order_in_flight_ == 0) break;  // deadlines grow along the queue but for these
        continue;
      }
      p.finished = true;
      p.done(Status::DeadlineExceeded("no reply from Redis at " + Address() + " within " +
                                      std::to_string(options_.timeout.count() / 1000) + " ms"));
    }
    if (inflight_.empty()) return;
    // Hung: the oldest call is past its deadline and nothing was read for hang_timeout since.
    const auto hung_at = std::max(last_read_, inflight_.front().deadline) + options_.hang_timeout;
    if (hung_at <= now) {
      return Disconnect("Redis did not answer for " +
                        std::to_string(options_.hang_timeout.count() / 1000) + " ms");
    }
    ArmDeadlineTimer(std::min(next, hung_at));
  }

  void Connect() {
    if (stopping_) return;
    ++generation_;
    socket_ = Socket(io_);
    connect_timer_.expires_after(options_.connect_timeout);
    connect_timer_.async_wait([this, gen = generation_](boost::system::error_code ec) {
      if (ec || gen != generation_ || ConnectedOnIoThread()) return;
      resolver_.cancel();
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
    if (!options_.unix_path.empty()) {
      return ConnectTo({Endpoint(asio::local::stream_protocol::endpoint(options_.unix_path))});
    }
    resolver_.async_resolve(
        options_.host, std::to_string(options_.port),
        [this, gen = generation_](boost::system::error_code ec,
                                  asio::ip::tcp::resolver::results_type results) {
          if (gen != generation_) return;
          if (ec) return ConnectFailed("cannot resolve " + options_.host + ": " + ec.message());
          std::vector<Endpoint> endpoints;
          for (const auto& r : results) endpoints.emplace_back(r.endpoint());
          ConnectTo(std::move(endpoints));
        });
  }

  void ConnectTo(std::vector<Endpoint> endpoints, size_t next = 0) {
    if (next >= endpoints.size()) return ConnectFailed("cannot connect to " + Address());
    socket_ = Socket(io_);
    socket_.async_connect(endpoints[next], [this, gen = generation_, endpoints,
                                            next](boost::system::error_code ec) mutable {
      if (gen != generation_) return;
      if (ec == asio::error::operation_aborted) {
        return ConnectFailed("connecting to " + Address() + " timed out");
      }
      if (ec) return ConnectTo(std::move(endpoints), next + 1);
      Connected();
    });
  }

  void Connected() {
    if (options_.unix_path.empty()) {
      const int one = 1;
      setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    {
      core::MutexLock lock(mu_);
      connected_ = true;
    }
    last_read_ = Steady::now();
    Read();
    Handshake();
  }

  // AUTH, SELECT and a PING, before any caller's command; ready once all have answered.
  void Handshake() {
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
        if (!r.ok() || r->is_error()) {
          *failed = true;
          const std::string why = r.ok() ? r->str : r.status().message();
          // Not from inside the reply loop: drop the connection on the next turn.
          asio::post(io_, [this, gen, why, what] {
            if (gen == generation_) Disconnect(what + " failed: " + why);
          });
          return;
        }
        if (last) {
          backoff_ = options_.reconnect_min;
          connects.fetch_add(1, std::memory_order_relaxed);
          core::MutexLock lock(mu_);  // see Submit
          ready_.store(true, std::memory_order_release);
        }
      };
    }
    pending_.fetch_add(entries.size(), std::memory_order_relaxed);
    Enqueue(bytes, entries);
  }

  void ConnectFailed(const std::string& why) {
    SetError(why);
    connect_timer_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
    ScheduleReconnect();
  }

  void Disconnect(const std::string& why) {
    SetError(why);
    Drop(Status::Unavailable("connection to Redis at " + Address() + " lost: " + why));
    ScheduleReconnect();
  }

  // Closes the socket and fails every call that has not been answered.
  void Drop(const Status& status) {
    ++generation_;
    boost::system::error_code ignored;
    socket_.close(ignored);
    redisReaderFree(reader_);
    reader_ = redisReaderCreate();
    writing_active_ = false;
    writing_.clear();
    out_of_order_in_flight_ = 0;
    loading_.clear();
    std::vector<Pending> taken;
    {
      core::MutexLock lock(mu_);
      ready_.store(false, std::memory_order_release);  // see Submit
      connected_ = false;
      taken.swap(incoming_);
      outgoing_.clear();
    }
    for (auto& p : inflight_) taken.push_back(std::move(p));
    inflight_.clear();
    FailAll(taken, status);
  }

  void FailAll(std::vector<Pending>& entries, const Status& status) {
    pending_.fetch_sub(entries.size(), std::memory_order_relaxed);
    for (auto& p : entries) {
      if (!p.finished && p.kind != Pending::Kind::kIgnoreReply) p.done(status);
    }
  }

  void ScheduleReconnect() {
    if (stopping_) return;
    const ReconnectWait wait =
        NextReconnectWait(backoff_, options_.reconnect_min, options_.reconnect_max, jitter_);
    reconnect_timer_.expires_after(wait.delay);
    backoff_ = wait.backoff;
    reconnect_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) Connect();
    });
  }

  // Only the I/O thread writes connected_, so there it reads it without the lock.
  bool ConnectedOnIoThread() const NO_THREAD_SAFETY_ANALYSIS { return connected_; }

  void SetError(const std::string& why) {
    core::MutexLock lock(error_mu_);
    last_error_ = why;
  }

  asio::io_context& io_;
  const ClientOptions& options_;
  Socket socket_;
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer deadline_timer_, reconnect_timer_, connect_timer_;
  redisReader* reader_;
  std::array<char, 16 * 1024> read_buffer_;

  core::Mutex mu_;
  std::string outgoing_ GUARDED_BY(mu_);
  std::vector<Pending> incoming_ GUARDED_BY(mu_);
  bool flush_posted_ GUARDED_BY(mu_) = false;
  bool connected_ GUARDED_BY(mu_) = false;  // written on the I/O thread (ConnectedOnIoThread)
  Steady::time_point last_in_order_deadline_ GUARDED_BY(mu_){};

  std::atomic<bool> ready_{false};  // written under mu_ (see Submit)
  std::atomic<size_t> pending_{0};  // accepted and not yet answered or failed
  mutable core::Mutex error_mu_;
  std::string last_error_ GUARDED_BY(error_mu_);

  // I/O thread only.
  std::deque<Pending> inflight_;
  std::string writing_;
  bool writing_active_ = false;
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

class AsioClient final : public Client {
 public:
  explicit AsioClient(ClientOptions options) : options_(std::move(options)) {
    const int threads = options_.io_threads;
    for (int t = 0; t < threads; ++t) {
      auto& io = ios_.emplace_back(std::make_unique<asio::io_context>(1));
      guards_.emplace_back(asio::make_work_guard(*io));
      for (int c = 0; c < options_.connections_per_thread; ++c) {
        connections_.push_back(
            std::make_unique<Connection>(*io, options_, static_cast<int>(connections_.size())));
      }
    }
    for (auto& c : connections_) c->Start();
    for (auto& io : ios_) threads_.emplace_back([&io = *io] { io.run(); });
  }

  ~AsioClient() override {
    std::vector<std::future<void>> done;
    for (size_t i = 0; i < connections_.size(); ++i) {
      auto& io = *ios_[i / options_.connections_per_thread];
      auto stopped = std::make_shared<std::promise<void>>();
      done.push_back(stopped->get_future());
      asio::post(io, [c = connections_[i].get(), stopped] {
        c->Shutdown();
        stopped->set_value();
      });
    }
    for (auto& f : done) f.wait();
    guards_.clear();
    for (auto& io : ios_) io->stop();
    for (auto& t : threads_) t.join();
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

  bool connected_for_testing() const override {
    for (auto& c : connections_) {
      if (c->ready()) return true;
    }
    return false;
  }

  ClientStats stats_for_testing() const override {
    ClientStats s;
    for (auto& c : connections_) {
      s.commands += c->commands.load();
      s.writes += c->writes.load();
      s.connects += c->connects.load();
    }
    return s;
  }

 private:
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

  // Of the next two ready connections in round-robin order, the one with fewer calls pending.
  Connection& Pick() {
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
  std::vector<std::unique_ptr<asio::io_context>> ios_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
};

}  // namespace

Script Script::FromSource(std::string source) {
  boost::uuids::detail::sha1 hash;
  hash.process_bytes(source.data(), source.size());
  boost::uuids::detail::sha1::digest_type digest;
  hash.get_digest(digest);
  char hex[41];
  for (int i = 0; i < 5; ++i) std::snprintf(hex + 8 * i, 9, "%08x", digest[i]);
  return Script{.source = std::move(source), .sha1 = std::string(hex, 40)};
}

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.unix_path.empty() && (options.port <= 0 || options.port > 65535)) {
    return Status::InvalidArgument("Redis port must be from 1 to 65535");
  }
  if (options.timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return Status::InvalidArgument("Redis timeouts must be positive");
  }
  if (options.io_threads < 1 || options.connections_per_thread < 1) {
    return Status::InvalidArgument("a Redis client needs at least one thread and connection");
  }
  if (options.max_pending_per_connection < 1) {
    return Status::InvalidArgument("max_pending_per_connection must be at least 1");
  }
  if (options.reconnect_min.count() <= 0 || options.reconnect_max < options.reconnect_min) {
    return Status::InvalidArgument("reconnect_min must be positive and at most reconnect_max");
  }
  auto client = std::make_unique<AsioClient>(std::move(options));
  client->WaitReady();
  return std::unique_ptr<Client>(std::move(client));
}

Result<Reply> Client::CommandSync(std::span<const std::string_view> argv) {
  return core::Await<Result<Reply>>([&](auto done) { Command(argv, std::move(done)); });
}

Result<Reply> Client::EvalShaSyncForTesting(const Script& script,
                                            std::span<const std::string_view> keys,
                                            std::span<const std::string_view> args) {
  return core::Await<Result<Reply>>(
      [&](auto done) { EvalSha(script, keys, args, std::move(done)); });
}

}  // namespace sluice::redis
