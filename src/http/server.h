// The HTTP/1.1 server of `sluice serve`, on Boost.Beast: asynchronous, keep-alive, on I/O threads
// that each run an io_context of their own (redis/io_threads.h: its own, or shared with a Redis
// store, see ServerOptions::threads), every connection on one of them in turn, whose one thread
// runs its steps one at a time (its strand). Each request goes to Api::Handle; the answer may
// come back on another thread and is written from the connection's, so a slow store never blocks
// an I/O thread. While a request waits for its
// turn (/v1/acquire), the connection is still read: a client that disconnects has its acquire
// abandoned (Api::Abandon), and what it pipelines meanwhile is kept for later. Limits: a request's
// header (431 above header_limit bytes or max_header_fields fields), its body (413 above
// body_limit), the time for a request to arrive once started (read_timeout) and for a kept-alive
// connection to stay silent (idle_timeout).
//
// Connections are bounded by max_connections. From 90% of it, each new connection first closes
// the connection that has waited longest for a request (one that has never sent a byte before
// one kept alive after an answer): a flood of silent connections only churns itself, while
// connections in the middle of a request are never cut. At the bound with none waiting, a new
// connection is answered a fixed 503 (Connection: close, Retry-After: 1) without reading its
// request and closed at once, so a refusal costs one descriptor for microseconds. An accept that
// fails (out of file descriptors: EMFILE, ENFILE) pauses accepting for 50 ms rather than
// retrying at once; its warning is logged at most every 10 s. All counted in Metrics
// (sluice_http_connections, ..._refused_total, sluice_http_idle_connections_closed_total,
// sluice_http_accept_errors_total).
//
// With options.tls, every connection speaks TLS (1.2 at least) with the certificate current when
// it was accepted: the handshake must end within read_timeout, and the connection counts as idle
// until its first request. A handshake that fails is counted
// (sluice_http_tls_handshake_failures_total) and logged at most every 10 s with its cause; a plain
// HTTP request is answered 400 in plain HTTP and never reaches the Api. Under mTLS the client's
// verified certificate's names go with each request (Request::certificate_names). A connection
// the server closes (idle, a request too slow, a drain) ends with a close_notify, the client's own
// awaited at most 500 ms; one reclaimed for room is closed at once.
//
// Start serves on the threads; Drain stops gracefully: it stops accepting, closes idle
// connections, lets requests in flight be answered (on a closing connection), and returns once
// every connection is gone or drain_timeout has passed (those left are then closed, and gone
// before it returns: the threads may be shared and run on). What calls them (signals, for
// `sluice serve`) is the caller's.
//
// Thread safety: construct, Listen, Start, Drain and destroy from one thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "http/api.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::tls {
class RotatingContext;  // tls/rotating_context.h
}  // namespace sluice::tls

namespace sluice::redis {
class IoThreads;  // redis/io_threads.h
}  // namespace sluice::redis

namespace sluice::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  int io_threads = 1;
  // The threads to serve on, shared: `sluice serve` runs a single Redis's connections on them
  // too, so that a request's check and its answer stay on the connection's thread. Null:
  // io_threads threads of the server's own.
  std::shared_ptr<redis::IoThreads> threads{};
  Duration read_timeout = std::chrono::seconds(10);
  Duration idle_timeout = std::chrono::seconds(60);
  // The request line and the header fields together, in bytes; and the fields, in number.
  size_t header_limit = 8 * 1024;
  size_t max_header_fields = 100;
  size_t body_limit = kMaxBodyBytes;
  Duration drain_timeout = std::chrono::seconds(10);
  // Connections open at once (at least 1); see above for what happens near and at it.
  size_t max_connections = 10'000;
  // The endpoints served on this address (http/exchange.h); any other path is 404.
  Endpoints endpoints = Endpoints::kAll;
  // HTTPS: each connection takes the context current when it is accepted, and keeps it; null:
  // plain HTTP. Must outlive the server.
  const tls::RotatingContext* tls = nullptr;
};

class Server {
 public:
  // `api` must outlive the server.
  Server(ServerOptions options, Api& api);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens. UNAVAILABLE if the address cannot be resolved or bound.
  Status Listen();
  // The bound port, once listening.
  uint16_t port() const;

  // Starts accepting and answering on the threads; returns at once. Once, after Listen.
  void Start();
  // Stops gracefully (see above), answering the acquires still waiting at once
  // (Api::CancelWaits), and returns once no handler of the server is left on the I/O threads.
  // Once, after Start; the destructor drains a server started and not drained.
  void Drain();

 private:
  class Session;
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  // What the server knows of a connection.
  struct Standing {
    // Closed to make room: no longer counted against the bound, and takes no more requests.
    bool reclaimed = false;
    // While the connection waits for a request: the list it waits in, and its place there.
    std::list<Session*>* idle = nullptr;
    std::list<Session*>::iterator idle_at;
  };

  // A warning logged at most once per interval, with how often its cause happened meanwhile.
  class OccasionalWarning {
   public:
    static constexpr auto kInterval = std::chrono::seconds(10);
    // Counts one occurrence; returns the occurrences since the last warning when one is due
    // now, else 0.
    uint64_t Count(std::chrono::steady_clock::time_point now) {
      ++count_;
      if (now < next_) return 0;
      next_ = now + kInterval;
      return std::exchange(count_, 0);
    }

   private:
    std::chrono::steady_clock::time_point next_;
    uint64_t count_ = 0;
  };

  void Accept();
  // After a failed accept: accepts again in a while.
  void PauseAccepting(const boost::system::error_code& error);
  // Serves the connection, or refuses it at the bound.
  void Admit(boost::asio::ip::tcp::socket socket);
  void Refuse(boost::asio::ip::tcp::socket socket);
  // A TLS handshake failed (or timed out, or met plain HTTP): counted, and logged at most every
  // OccasionalWarning::kInterval with its latest cause. From any session's strand.
  void CountHandshakeFailure(const boost::asio::ip::tcp::endpoint& peer, std::string_view why);
  // Takes the connection that has waited longest for a request out of the count, to be closed
  // (null if none waits). The caller drops what it returns only after unlocking mu_.
  std::shared_ptr<Session> ReclaimIdle() SLUICE_REQUIRES(mu_);
  // Every session not being destroyed; the caller drops them only after unlocking mu_.
  std::vector<std::shared_ptr<Session>> LiveSessions() SLUICE_REQUIRES(mu_);
  // Waits, `lock` holding mu_, until no session is left or `deadline` passes; whether none is.
  bool AwaitNoSessions(base::MutexLock& lock, std::chrono::steady_clock::time_point deadline)
      SLUICE_REQUIRES(mu_);
  // Closes the connections left, and waits until none is and no accept is pending.
  void Stop();
  // Counts `session` in, idle (waiting for its first request), on strand_ after Admit.
  void Register(Session* session);
  void Unregister(Session* session);
  // `session` waits for its next request, and may be reclaimed.
  void EnterIdle(Session* session);
  // `session` has something to read: false if it was reclaimed meanwhile, and must close.
  bool LeaveIdle(Session* session);

  const ServerOptions options_;
  Api& api_;
  // Reclaiming idle connections starts at this many open.
  const size_t reclaim_from_;
  // The response to a connection refused at the bound.
  const std::string refusal_;

  // Declared before the io_context: sessions destroyed with it still unregister here.
  base::Mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<Session*, Standing> sessions_ SLUICE_GUARDED_BY(mu_);
  // The connections counted against max_connections: accepted, not yet closed or reclaimed.
  size_t open_ SLUICE_GUARDED_BY(mu_) = 0;
  // Connections waiting for a request, longest waiting first: those that never had one, and
  // those kept alive after an answer.
  std::list<Session*> fresh_idle_ SLUICE_GUARDED_BY(mu_);
  std::list<Session*> kept_idle_ SLUICE_GUARDED_BY(mu_);
  std::atomic<bool> draining_{false};
  // Answers a store's thread is handing to their sessions (Session::OnExchangeDone): the
  // io_context must outlive the executor copies of each, which Stop waits for.
  std::atomic<int> handing_over_{0};
  // Accepts and accept backoff waits pending, whose handlers use the server: Stop waits for them.
  std::atomic<int> accept_ops_{0};
  bool started_ = false;

  std::shared_ptr<redis::IoThreads> threads_;
  std::atomic<size_t> next_thread_{0};  // the thread of the next connection accepted
  Strand strand_;                       // the acceptor's and the accept backoff timer's
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_backoff_;
  OccasionalWarning refusals_;       // on strand_
  OccasionalWarning accept_errors_;  // on strand_
  base::Mutex handshake_failures_mu_;
  OccasionalWarning handshake_failures_ SLUICE_GUARDED_BY(handshake_failures_mu_);
};

}  // namespace sluice::http
