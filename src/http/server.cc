#include "http/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "http/session.h"
#include "redis/io_threads.h"
#include "tls/rotating_context.h"

namespace sluice::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);
// How long Stop waits for the connections it closes to be gone.
constexpr auto kStopTimeout = std::chrono::seconds(5);

// Counts an asynchronous operation of the server pending until its handler has run.
class PendingOp {
 public:
  explicit PendingOp(std::atomic<int>& ops) : ops_(&ops) { ops.fetch_add(1); }
  PendingOp(PendingOp&& other) noexcept : ops_(std::exchange(other.ops_, nullptr)) {}
  PendingOp(const PendingOp&) = delete;
  PendingOp& operator=(const PendingOp&) = delete;
  PendingOp& operator=(PendingOp&&) = delete;
  ~PendingOp() {
    if (ops_ != nullptr && ops_->fetch_sub(1) == 1) ops_->notify_all();
  }

 private:
  std::atomic<int>* ops_;
};

std::string RefusalResponse(size_t max_connections) {
  const std::string body = fmt::format(
      R"({{"error":"too many connections: the server holds at most {} at once; retry later"}})",
      max_connections);
  return fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
}

}  // namespace

Server::Server(ServerOptions options, Api& api)
    : options_(std::move(options)),
      api_(api),
      reclaim_from_(std::max<size_t>(options_.max_connections - options_.max_connections / 10, 1)),
      refusal_(RefusalResponse(options_.max_connections)),
      threads_(options_.threads ? options_.threads
                                : std::make_shared<redis::IoThreads>(options_.io_threads)),
      strand_(net::make_strand(threads_->at(0))),
      acceptor_(strand_),
      accept_backoff_(strand_) {}

Server::~Server() {
  if (started_) Drain();
}

Status Server::Listen() {
  const auto fail = [&](const beast::error_code& ec) {
    return Status::Unavailable(
        fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message()));
  };
  beast::error_code ec;
  tcp::resolver resolver(threads_->at(0));
  const auto endpoints =
      resolver.resolve(options_.host, std::to_string(options_.port), tcp::resolver::passive, ec);
  if (ec) return fail(ec);
  const tcp::endpoint endpoint = *endpoints.begin();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail(ec);
  return Status::Ok();
}

uint16_t Server::port() const { return acceptor_.local_endpoint().port(); }

void Server::Accept() {
  const auto thread = static_cast<int>(next_thread_.fetch_add(1, std::memory_order_relaxed) %
                                       static_cast<size_t>(threads_->size()));
  // No strand: one thread runs each io_context, and so every step of the connection in turn.
  acceptor_.async_accept(threads_->at(thread), [this, op = PendingOp(accept_ops_)](
                                                   beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (ec) return PauseAccepting(ec);
    Admit(std::move(socket));
    Accept();
  });
}

void Server::PauseAccepting(const beast::error_code& error) {
  // Typically out of file descriptors: wait for some to be released rather than spin.
  api_.metrics().CountAcceptError();
  if (const uint64_t failed = accept_errors_.Count(std::chrono::steady_clock::now())) {
    spdlog::warn(
        "accept failed: {} ({} time(s) since the last warning); accepting again every "
        "{} ms",
        error.message(), failed, kAcceptBackoff.count());
  }
  accept_backoff_.expires_after(kAcceptBackoff);
  accept_backoff_.async_wait([this, op = PendingOp(accept_ops_)](beast::error_code) {
    if (acceptor_.is_open()) Accept();
  });
}

void Server::Admit(tcp::socket socket) {
  std::shared_ptr<Session> reclaimed;
  bool admitted = false;
  {
    base::MutexLock lock(mu_);
    if (open_ >= reclaim_from_) reclaimed = ReclaimIdle();
    admitted = open_ < options_.max_connections;
    if (admitted) ++open_;
    api_.metrics().SetOpenConnections(open_);
  }
  if (reclaimed) {
    api_.metrics().CountIdleConnectionClosed();
    reclaimed->Reclaim();
  }
  if (!admitted) return Refuse(std::move(socket));
  std::make_shared<Session>(*this, std::move(socket),
                            options_.tls ? options_.tls->Current() : nullptr)
      ->Start();
}

void Server::Refuse(tcp::socket socket) {
  api_.metrics().CountConnectionRefused();
  if (const uint64_t refused = refusals_.Count(std::chrono::steady_clock::now())) {
    spdlog::warn(
        "refusing new connections: {} open (server.max_connections) and none idle; {} "
        "refused since the last warning",
        options_.max_connections, refused);
  }
  beast::error_code ignored;
  socket.non_blocking(true, ignored);
  // What the client has sent already is read first: closing with unread bytes would reset the
  // connection, which can discard the 503 before the client reads it.
  std::array<char, kReadChunk> unread;
  socket.receive(net::buffer(unread), 0, ignored);
  socket.send(net::buffer(refusal_), 0, ignored);
  socket.close(ignored);
}

void Server::CountHandshakeFailure(const tcp::endpoint& peer, std::string_view why) {
  api_.metrics().CountTlsHandshakeFailure();
  base::MutexLock lock(handshake_failures_mu_);
  if (const uint64_t failed = handshake_failures_.Count(std::chrono::steady_clock::now())) {
    spdlog::warn("TLS handshake from {} failed: {} ({} failure(s) since the last warning)",
                 peer.address().to_string(), why, failed);
  }
}

std::shared_ptr<Server::Session> Server::ReclaimIdle() {
  for (std::list<Session*>* idle : {&fresh_idle_, &kept_idle_}) {
    while (!idle->empty()) {
      Session* session = idle->front();
      idle->pop_front();
      Standing& standing = sessions_.at(session);
      standing.idle = nullptr;
      std::shared_ptr<Session> alive = session->weak_from_this().lock();
      if (!alive) continue;  // being destroyed: Unregister uncounts it
      standing.reclaimed = true;
      --open_;
      return alive;
    }
  }
  return nullptr;
}

void Server::Register(Session* session) {
  base::MutexLock lock(mu_);
  Standing& standing = sessions_[session];
  // Idle from the start: what an attacker opens and leaves silent is reclaimed first.
  standing.idle = &fresh_idle_;
  standing.idle_at = fresh_idle_.insert(fresh_idle_.end(), session);
}

void Server::Unregister(Session* session) {
  base::MutexLock lock(mu_);
  const auto it = sessions_.find(session);
  const Standing& standing = it->second;
  if (standing.idle != nullptr) standing.idle->erase(standing.idle_at);
  if (!standing.reclaimed) --open_;
  sessions_.erase(it);
  api_.metrics().SetOpenConnections(open_);
  if (sessions_.empty()) cv_.notify_all();
}

void Server::EnterIdle(Session* session) {
  base::MutexLock lock(mu_);
  Standing& standing = sessions_.at(session);
  // Not yet used since Register; or reclaimed already (before its first read started): counted
  // out once, it must not be found idle and counted out again.
  if (standing.idle != nullptr || standing.reclaimed) return;
  standing.idle = &kept_idle_;
  standing.idle_at = kept_idle_.insert(kept_idle_.end(), session);
}

bool Server::LeaveIdle(Session* session) {
  base::MutexLock lock(mu_);
  Standing& standing = sessions_.at(session);
  if (standing.idle != nullptr) {
    standing.idle->erase(standing.idle_at);
    standing.idle = nullptr;
  }
  return !standing.reclaimed;
}

void Server::Start() {
  net::dispatch(strand_, [this] { Accept(); });
  started_ = true;
}

std::vector<std::shared_ptr<Server::Session>> Server::LiveSessions() {
  std::vector<std::shared_ptr<Session>> live;
  for (const auto& [session, standing] : sessions_) {
    // Null while the session is being destroyed.
    if (auto alive = session->weak_from_this().lock()) live.push_back(std::move(alive));
  }
  return live;
}

bool Server::AwaitNoSessions(base::MutexLock& lock,
                             std::chrono::steady_clock::time_point deadline) {
  while (!sessions_.empty() && std::chrono::steady_clock::now() < deadline) {
    lock.WaitUntil(cv_, deadline);
  }
  return sessions_.empty();
}

void Server::Drain() {
  base::MutexLock lock(mu_);
  spdlog::info("stopping: draining {} connection(s)", sessions_.size());
  // Sessions registering from now on see draining_ and close at once.
  draining_ = true;
  net::post(strand_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_backoff_.cancel();
  });
  std::vector<std::shared_ptr<Session>> live = LiveSessions();
  // Dropping the last reference to a session unregisters it, which takes mu_.
  lock.Unlock();
  for (auto& session : live) session->Drain();
  live.clear();
  api_.CancelWaits();  // acquires waiting for a slot are answered now, not at their slot
  lock.Lock();
  const bool drained =
      AwaitNoSessions(lock, std::chrono::steady_clock::now() + options_.drain_timeout);
  lock.Unlock();
  if (!drained) spdlog::warn("drain timed out; closing the remaining connections");
  Stop();
  spdlog::info("stopped");
}

void Server::Stop() {
  // The threads may be shared and run on: every handler that reaches this server must have run.
  base::MutexLock lock(mu_);
  std::vector<std::shared_ptr<Session>> left = LiveSessions();
  lock.Unlock();
  for (auto& session : left) session->Reclaim();
  left.clear();
  lock.Lock();
  if (!AwaitNoSessions(lock, std::chrono::steady_clock::now() + kStopTimeout)) {
    spdlog::error("{} connection(s) still open {} s after being closed", sessions_.size(),
                  kStopTimeout.count());
  }
  lock.Unlock();
  for (std::atomic<int>* ops : {&accept_ops_, &handing_over_}) {
    for (int n = ops->load(std::memory_order_acquire); n != 0;
         n = ops->load(std::memory_order_acquire)) {
      ops->wait(n, std::memory_order_acquire);
    }
  }
  started_ = false;
}

}  // namespace sluice::http
