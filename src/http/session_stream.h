// The byte stream of a Server session (http/session.h): plain TCP, or TLS over it, chosen when
// the connection is accepted. An asynchronous read and write stream for Beast's HTTP reads and
// writes, with the TCP stream underneath for timeouts, cancellation and closing. Used from the
// session's strand only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <utility>
#include <variant>

namespace sluice::http {

class SessionStream {
 public:
  using Tls = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using executor_type = boost::beast::tcp_stream::executor_type;

  // Plain TCP.
  explicit SessionStream(boost::asio::ip::tcp::socket socket)
      : stream_(std::in_place_type<boost::beast::tcp_stream>, std::move(socket)) {}
  // TLS with `context`, which must outlive the stream; the handshake is the caller's.
  SessionStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context& context)
      : stream_(std::in_place_type<Tls>, std::move(socket), context) {}

  // Null for plain TCP.
  Tls* tls() { return std::get_if<Tls>(&stream_); }
  boost::beast::tcp_stream& tcp() {
    return std::visit(
        [](auto& stream) -> boost::beast::tcp_stream& {
          return boost::beast::get_lowest_layer(stream);
        },
        stream_);
  }
  executor_type get_executor() { return tcp().get_executor(); }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    std::visit(
        [&](auto& stream) { stream.async_read_some(buffers, std::forward<Handler>(handler)); },
        stream_);
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    std::visit(
        [&](auto& stream) { stream.async_write_some(buffers, std::forward<Handler>(handler)); },
        stream_);
  }

 private:
  std::variant<boost::beast::tcp_stream, Tls> stream_;
};

}  // namespace sluice::http
