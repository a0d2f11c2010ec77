// The HTTP/1.1 server of `sluice serve`, on Boost.Beast: asynchronous, keep-alive, on a pool of
// I/O threads, with every connection on its own strand. Each request goes to Api::Handle; the
// answer may come back on a store thread and is written from the connection's strand, so a slow
// store never blocks an I/O thread. While a request waits for its turn (/v1/acquire), the
// connection is still read: a client that disconnects has its acquire abandoned (Api::Abandon),
// and what it pipelines meanwhile is kept for later. Limits: a request's header (431 above
// header_limit), its body (413 above body_limit), the time for a request to arrive once started
// (read_timeout) and for a kept-alive connection to stay silent (idle_timeout).
//
// Start serves on threads of its own; Drain stops gracefully: it stops accepting, closes idle
// connections, lets requests in flight be answered (on a closing connection), and returns once
// every connection is gone or drain_timeout has passed. What calls them (signals, for
// `sluice serve`) is the caller's.
//
// Thread safety: construct, Listen, Start, Drain and destroy from one thread.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/mutex.h"
#include "http/api.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  int io_threads = 1;
  Duration read_timeout = std::chrono::seconds(10);
  Duration idle_timeout = std::chrono::seconds(60);
  size_t header_limit = 8 * 1024;
  size_t body_limit = kMaxBodyBytes;
  Duration drain_timeout = std::chrono::seconds(10);
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

  // Starts accepting and answering on `io_threads` threads; returns at once. Once, after Listen.
  void Start();
  // Stops gracefully (see above), answering the acquires still waiting at once
  // (Api::CancelWaits), then ends the I/O threads. Once, after Start; the destructor drains a
  // server started and not drained.
  void Drain();

 private:
  class Session;
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  void Accept();
  // Ends the I/O threads, dropping whatever they still had to do.
  void Stop();
  void Register(Session* session);
  void Unregister(Session* session);

  const ServerOptions options_;
  Api& api_;

  // Declared before the io_context: sessions destroyed with it still unregister here.
  core::Mutex mu_;
  std::condition_variable cv_;
  std::unordered_set<Session*> sessions_ GUARDED_BY(mu_);
  std::atomic<bool> draining_{false};

  boost::asio::io_context ioc_;
  Strand strand_;  // the acceptor's and the accept backoff timer's
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_backoff_;
  // While started: keeps the I/O threads running when no I/O is pending, as while a session
  // waits for the Api (a store call, an acquire's slot).
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

}  // namespace sluice::http
