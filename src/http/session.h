// One HTTP/1.1 connection of the Server (http/server.h), over TCP or TLS: reads its requests within
// the server's bounds, hands each to the Api, writes the answers back, and keeps the connection
// alive, lingers or closes it. Every step runs on the connection's strand but OnExchangeDone, which
// hands the answer over to it from any thread.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fair_admission.h"
#include "http/exchange.h"
#include "http/server.h"
#include "http/session_stream.h"

namespace sluice::http {

// The most bytes one read from a client's socket takes.
inline constexpr size_t kReadChunk = 4096;

class Server::Session : public std::enable_shared_from_this<Session> {
 public:
  // Over TLS with `tls` (the handshake first), else plain TCP.
  Session(Server& server, boost::asio::ip::tcp::socket socket,
          std::shared_ptr<boost::asio::ssl::context> tls);
  ~Session();

  void Start();

  // Closes the connection, reclaimed while it waited for a request (Server::ReclaimIdle).
  void Reclaim();

  // Closes the connection once the request in flight, if any, is answered.
  void Drain();

 private:
  // TLS: reads the ClientHello (or a plain request, refused), then completes the handshake.
  void AwaitClientHello();
  void OnHandshake(boost::beast::error_code ec);
  void OnHandshakeFailed(boost::beast::error_code ec);
  void RefusePlaintext();

  void WaitForRequest();

  void ReadRequest();

  // Beast's header_limit bounds only the part of the header not parsed yet: the request line and
  // the fields its parser took from earlier reads are not counted, so a header arriving in pieces
  // passed well above the limit (12 KB of 8 KiB sent at once). The header is parsed here, piece by
  // piece, never past header_limit bytes in all; the body then by async_read.
  void ParseHeader();

  void OnRead(boost::beast::error_code ec);

  // While the Api waits for the request's turn, a read stays pending, so that a client that
  // leaves gives up its place in line at once instead of holding it until the wait ends. What
  // the client sends meanwhile (a pipelined request) stays in the buffer for the next parse.
  void WatchClient();

  void OnWatch(boost::beast::error_code ec, size_t n);

  // Answers a request the HTTP layer could not take, then closes the connection.
  void Refuse(int status, std::string_view message);

  // Runs on any thread, when the Api has answered. From a store's thread, the session (and the
  // server after it) may be gone before dispatch's copies of the executor are: the server waits
  // for them (handing_over_), and nothing here touches the session after dispatch.
  void OnExchangeDone();

  void OnAnswer();

  void Respond();

  void OnWrite(boost::beast::error_code ec);

  // After a refusal of a request not read whole: ends what the server sends (over TLS, with a
  // close_notify) and reads what the client still sends, for a while, so that the client reads
  // the refusal rather than a reset connection.
  void Linger();
  void EndWritesAndDiscard();
  void Discard();

  // Bounds the reads to come by `timeout`. Over TLS, the TCP stream's own bound would close the
  // socket when it passes, and the session could not send its close_notify: its own bound cancels
  // the read instead, and the session closes as for any failed read.
  void BoundReads(Duration timeout);
  // Ends the bound of BoundReads over TLS (the TCP stream's is the caller's to set).
  void StopReadDeadline();

  // Closes the connection: over TLS, with a close_notify first (its answer awaited a little), so
  // that the client can tell the end of the stream from a cut connection. No operation may be
  // pending on the TLS stream.
  void Close();
  // Closes the connection at once.
  void CloseNow();

  Server& server_;
  // The connection, as the store's admission knows it: its share is its own.
  const core::FairAdmission::Caller caller_;
  boost::asio::ip::tcp::endpoint peer_;
  std::shared_ptr<boost::asio::ssl::context> tls_context_;  // null: plain TCP
  SessionStream stream_;
  boost::asio::steady_timer read_deadline_;  // BoundReads' over TLS
  // Once the TLS handshake is done, until the connection starts to close.
  bool close_notify_due_ = false;
  // The DNS and URI names of the client's certificate, verified, when it presented one (mTLS):
  // read once, for every request of the session.
  std::optional<std::vector<std::string>> certificate_names_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::string body_storage_;
  boost::beast::http::response<boost::beast::http::string_body> response_;
  Exchange exchange_;
  std::shared_ptr<Session> in_flight_;  // keeps the session alive while the Api has the request
  bool keep_alive_ = false;
  unsigned version_ = 11;
  bool busy_ = false;          // a request is being answered
  bool watching_ = false;      // WatchClient's read is pending
  bool answer_ready_ = false;  // the Api answered while watching_
  bool draining_ = false;
  bool linger_ = false;
  size_t lingered_ = 0;
  size_t header_bytes_ = 0;  // of the request being read, parsed so far
};

}  // namespace sluice::http
