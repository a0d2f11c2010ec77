// Transport: the byte stream of one connection to Redis, over a TCP or Unix socket, plain or,
// with a TlsContext, TLS over the socket (SNI and the server's name checked by OpenSSL during
// the handshake). Each connection attempt gets a fresh one (Reset); the connection's reads and
// writes go through it unchanged either way.
//
// Thread safety: none; used on its connection's I/O thread only.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "redis/tls_context.h"

namespace sluice::redis {

class Transport {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;

  explicit Transport(boost::asio::io_context& io) : io_(io), socket_(io) {}

  // A new socket for the next attempt, and a TLS stream over it when `tls` is set, which
  // verifies `server_name` (unless the context verifies nothing).
  void Reset(const TlsContext* tls, const std::string& server_name);
  Socket& socket() { return socket_; }
  void Close();
  // Ends both directions: a read pending still takes what the peer sent before, then ends.
  void Shutdown();
  bool tls() const { return tls_.has_value(); }

  // The TLS handshake (the handler at once, on the next turn, for a plain socket).
  template <typename Handler>
  void AsyncHandshake(Handler&& handler) {
    if (!tls_) {
      return boost::asio::post(
          io_, [h = std::forward<Handler>(handler)]() mutable { h(boost::system::error_code()); });
    }
    tls_->async_handshake(boost::asio::ssl::stream_base::client, std::forward<Handler>(handler));
  }
  // What a failed handshake means: the verification's cause when the server's certificate was
  // refused, else OpenSSL's reason (a server speaking plain TCP, a client certificate required).
  std::string HandshakeError(const boost::system::error_code& ec);
  // The reason of a failed read or write, with OpenSSL's alert when there is one.
  static std::string Reason(const boost::system::error_code& ec);
  // Whether a failed read carries the server's own reason (a TLS alert), not only the end of the
  // stream or a reset.
  static bool IsAlert(const boost::system::error_code& ec);

  template <typename Buffer, typename Handler>
  void AsyncWrite(const Buffer& buffer, Handler&& handler) {
    if (tls_) return boost::asio::async_write(*tls_, buffer, std::forward<Handler>(handler));
    boost::asio::async_write(socket_, buffer, std::forward<Handler>(handler));
  }
  template <typename Buffer, typename Handler>
  void AsyncReadSome(const Buffer& buffer, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffer, std::forward<Handler>(handler));
    socket_.async_read_some(buffer, std::forward<Handler>(handler));
  }

 private:
  boost::asio::io_context& io_;
  Socket socket_;
  // Held while the stream is: the stream's SSL uses it.
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::optional<boost::asio::ssl::stream<Socket&>> tls_;
  std::string server_name_;
  bool verify_ = true;
};

}  // namespace sluice::redis
