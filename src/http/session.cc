#include "http/session.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "sluice/middleware/beast.h"
#include "tls/peer_certificate.h"

namespace sluice::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// After refusing a request, the bytes and time spent reading what the client still sends, so
// that it reads the refusal instead of a connection reset.
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr auto kLingerTime = std::chrono::seconds(1);
// How long a TLS session that ends waits for the client's close_notify after sending its own
// (which goes at once): the client's answer is a courtesy, and a silent one must not hold the
// connection, nor a drain.
constexpr auto kCloseNotifyTime = std::chrono::milliseconds(500);
// The first byte of a TLS record carrying a handshake message (a ClientHello, first).
constexpr unsigned char kTlsHandshakeRecord = 0x16;

constexpr std::string_view kPlaintextRefusal =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
    "Content-Length: 59\r\n\r\n"
    R"({"error":"this port speaks HTTPS: send the request by TLS"})";

bool IsHttpSyntaxError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
         ec != bhttp::error::partial_message;
}

core::FairAdmission::Caller NextCaller() {
  static std::atomic<core::FairAdmission::Caller> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// The client's address; unspecified when the socket cannot tell (the client has gone).
tcp::endpoint PeerOf(const tcp::socket& socket) {
  beast::error_code ignored;
  return socket.remote_endpoint(ignored);
}

}  // namespace

Server::Session::Session(Server& server, tcp::socket socket, std::shared_ptr<net::ssl::context> tls)
    : server_(server),
      caller_(NextCaller()),
      peer_(PeerOf(socket)),
      tls_context_(std::move(tls)),
      stream_(tls_context_ ? SessionStream(std::move(socket), *tls_context_)
                           : SessionStream(std::move(socket))),
      read_deadline_(stream_.get_executor()),
      buffer_(server.options_.header_limit + server.options_.body_limit + kReadChunk),
      exchange_([this] { OnExchangeDone(); }) {}

Server::Session::~Session() { server_.Unregister(this); }

void Server::Session::Start() {
  server_.Register(this);
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    if (self->stream_.tls()) return self->AwaitClientHello();
    self->WaitForRequest();
  });
}

// The handshake is bounded by read_timeout, and the connection counts as idle until its first
// request: one that never sends a ClientHello holds a slot no longer than a silent plain one.
void Server::Session::AwaitClientHello() {
  stream_.tcp().expires_after(server_.options_.read_timeout);
  stream_.tcp().async_read_some(
      buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
        self->buffer_.commit(n);
        if (ec) return self->OnHandshakeFailed(ec);
        const auto* first = static_cast<const unsigned char*>(self->buffer_.data().data());
        if (*first != kTlsHandshakeRecord) return self->RefusePlaintext();
        self->stream_.tls()->async_handshake(
            net::ssl::stream_base::server, self->buffer_.data(),
            // Beast 1.81 constrains this handler as if it took an error code alone.
            [self](beast::error_code ec, size_t = 0) { self->OnHandshake(ec); });
      });
}

void Server::Session::OnHandshake(beast::error_code ec) {
  // The ClientHello read ahead was handed to the handshake whole.
  buffer_.clear();
  if (ec) return OnHandshakeFailed(ec);
  if (const auto certificate = tls::VerifiedPeerCertificate(stream_.tls()->native_handle())) {
    certificate_names_ = tls::DnsAndUriNames(*certificate);
  }
  close_notify_due_ = true;
  WaitForRequest();
}

void Server::Session::OnHandshakeFailed(beast::error_code ec) {
  // Cancelled: closed by the server (reclaimed, drained), not the client's failure.
  if (ec != net::error::operation_aborted) server_.CountHandshakeFailure(peer_, ec.message());
  Close();
}

// A plain HTTP request on the TLS port: told so in plain HTTP, and never handed to the Api.
void Server::Session::RefusePlaintext() {
  server_.CountHandshakeFailure(peer_, "plain HTTP sent to the TLS port");
  net::async_write(stream_.tcp(), net::buffer(kPlaintextRefusal),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return self->Close();
                     self->stream_.tcp().expires_after(kLingerTime);
                     self->buffer_.clear();
                     self->EndWritesAndDiscard();
                   });
}

void Server::Session::Reclaim() {
  // At once, without a close_notify: a read is pending, and the connection's room is wanted.
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
}

void Server::Session::Drain() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->draining_ = true;
    if (!self->busy_) self->stream_.tcp().cancel();
  });
}

void Server::Session::WaitForRequest() {
  busy_ = false;
  if (draining_ || server_.draining_.load()) return Close();
  if (buffer_.size() > 0) return ReadRequest();  // pipelined
  server_.EnterIdle(this);
  BoundReads(server_.options_.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->buffer_.commit(n);
                            if (!self->server_.LeaveIdle(self.get()) || ec) return self->Close();
                            self->ReadRequest();
                          });
}

void Server::Session::ReadRequest() {
  if (parser_) {
    // Reuse the last body's storage.
    body_storage_ = std::move(parser_->release().body());
    body_storage_.clear();
  }
  parser_.emplace(std::piecewise_construct, std::make_tuple(std::move(body_storage_)));
  parser_->header_limit(static_cast<uint32_t>(server_.options_.header_limit));
  parser_->body_limit(server_.options_.body_limit);
  header_bytes_ = 0;
  BoundReads(server_.options_.read_timeout);
  ParseHeader();
}

void Server::Session::ParseHeader() {
  const size_t limit = server_.options_.header_limit;
  const size_t window = std::min(buffer_.size(), limit - header_bytes_);
  const bool window_reaches_limit = header_bytes_ + window == limit;
  beast::error_code ec = bhttp::error::need_more;
  if (window > 0) {
    const size_t used = parser_->put(net::const_buffer(buffer_.data().data(), window), ec);
    buffer_.consume(used);
    header_bytes_ += used;
  }
  if (ec == bhttp::error::need_more) {
    // The window held all the header may still have: it does not end within the limit.
    if (window_reaches_limit) return OnRead(bhttp::error::header_limit);
    return stream_.async_read_some(buffer_.prepare(kReadChunk),
                                   [self = shared_from_this()](beast::error_code ec, size_t n) {
                                     self->buffer_.commit(n);
                                     if (ec) return self->Close();
                                     self->ParseHeader();
                                   });
  }
  if (ec) return OnRead(ec);
  const auto& header = parser_->get();
  if (static_cast<size_t>(std::distance(header.begin(), header.end())) >
      server_.options_.max_header_fields) {
    return Refuse(431, fmt::format("request header has more than {} fields",
                                   server_.options_.max_header_fields));
  }
  if (parser_->is_done()) return OnRead({});
  bhttp::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void Server::Session::OnRead(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) {
    return Refuse(413, fmt::format("request body is above the maximum of {} bytes",
                                   server_.options_.body_limit));
  }
  if (ec == bhttp::error::header_limit) {
    return Refuse(431, fmt::format("request header is above the maximum of {} bytes",
                                   server_.options_.header_limit));
  }
  if (ec && IsHttpSyntaxError(ec)) return Refuse(400, "malformed HTTP request: " + ec.message());
  if (ec) return Close();

  busy_ = true;
  const auto& request = parser_->get();
  keep_alive_ = request.keep_alive();
  version_ = request.version();
  StopReadDeadline();
  stream_.tcp().expires_never();
  in_flight_ = shared_from_this();
  const middleware::BeastRequest client(request, peer_);
  if (server_.api_.Handle(
          {request.method_string(), request.target(), request.body(), &client, caller_,
           server_.options_.endpoints,
           certificate_names_ ? std::optional<std::span<const std::string>>(*certificate_names_)
                              : std::nullopt},
          exchange_)) {
    WatchClient();
  }
}

void Server::Session::WatchClient() {
  if (buffer_.size() + kReadChunk > buffer_.max_size()) return;  // no room to read into
  watching_ = true;
  stream_.async_read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void Server::Session::OnWatch(beast::error_code ec, size_t n) {
  buffer_.commit(n);
  watching_ = false;
  if (std::exchange(answer_ready_, false)) return Respond();
  if (!ec) return WatchClient();
  // Gone (or half-closed: it sends nothing more, so it cannot keep the connection either).
  keep_alive_ = false;
  server_.api_.Abandon(exchange_);  // its answer, "cancelled", comes through OnAnswer
}

void Server::Session::Refuse(int status, std::string_view message) {
  busy_ = true;
  server_.api_.Refuse(status, message, exchange_.response);
  keep_alive_ = false;
  version_ = parser_->is_header_done() ? parser_->get().version() : 11;
  linger_ = true;
  Respond();
}

void Server::Session::OnExchangeDone() {
  std::atomic<int>& handing_over = server_.handing_over_;
  handing_over.fetch_add(1, std::memory_order_relaxed);
  net::dispatch(stream_.get_executor(), [self = std::move(in_flight_)] { self->OnAnswer(); });
  if (handing_over.fetch_sub(1, std::memory_order_release) == 1) handing_over.notify_all();
}

void Server::Session::OnAnswer() {
  if (!watching_) return Respond();
  // The watching read ends first; OnWatch then responds.
  answer_ready_ = true;
  beast::error_code ignored;
  stream_.tcp().socket().cancel(ignored);
}

void Server::Session::Respond() {
  Response& answer = exchange_.response;
  response_ = {};
  response_.version(version_);
  response_.result(static_cast<unsigned>(answer.status));
  response_.set(bhttp::field::content_type, answer.content_type);
  for (size_t i = 0; i < answer.header_count; ++i) {
    response_.set(answer.headers[i].name, answer.headers[i].value);
  }
  response_.keep_alive(keep_alive_ && !draining_);
  response_.body() = std::move(answer.body);
  response_.prepare_payload();
  StopReadDeadline();
  stream_.tcp().expires_after(server_.options_.read_timeout);
  bhttp::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->OnWrite(ec);
  });
}

void Server::Session::OnWrite(beast::error_code ec) {
  exchange_.response.body = std::move(response_.body());  // keep its capacity
  if (ec) return CloseNow();
  if (linger_) return Linger();
  if (!response_.keep_alive()) return Close();
  WaitForRequest();
}

void Server::Session::Linger() {
  stream_.tcp().expires_after(kLingerTime);
  buffer_.clear();
  if (!close_notify_due_) return EndWritesAndDiscard();
  // The close_notify alone: the shutdown takes the client's as heard, so that it ends once its own
  // is written, where OpenSSL waiting for it would fail the connection on the client's next data.
  close_notify_due_ = false;
  StopReadDeadline();
  SSL* ssl = stream_.tls()->native_handle();
  SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
  stream_.tls()->async_shutdown([self = shared_from_this()](beast::error_code ec) {
    if (ec) return self->CloseNow();
    self->EndWritesAndDiscard();
  });
}

void Server::Session::EndWritesAndDiscard() {
  beast::error_code ignored;
  stream_.tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
  Discard();
}

// Reads what arrives on the socket, undecrypted, and drops it.
void Server::Session::Discard() {
  stream_.tcp().async_read_some(buffer_.prepare(kReadChunk),
                                [self = shared_from_this()](beast::error_code ec, size_t n) {
                                  self->lingered_ += n;
                                  if (ec || self->lingered_ > kMaxLingerBytes) return;
                                  self->Discard();
                                });
}

void Server::Session::BoundReads(Duration timeout) {
  if (!close_notify_due_) return stream_.tcp().expires_after(timeout);
  stream_.tcp().expires_never();
  read_deadline_.expires_after(timeout);
  read_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    // Not moved since it fired, the read it bounds still pending.
    if (!ec && self->read_deadline_.expiry() <= std::chrono::steady_clock::now()) {
      self->stream_.tcp().cancel();
    }
  });
}

void Server::Session::StopReadDeadline() {
  // Moved away rather than cancelled: a wait that has fired already must see it is no longer due.
  read_deadline_.expires_at(std::chrono::steady_clock::time_point::max());
}

void Server::Session::Close() {
  if (!close_notify_due_) return CloseNow();
  close_notify_due_ = false;
  StopReadDeadline();
  stream_.tcp().expires_after(kCloseNotifyTime);
  stream_.tls()->async_shutdown(
      [self = shared_from_this()](beast::error_code) { self->CloseNow(); });
}

void Server::Session::CloseNow() {
  close_notify_due_ = false;
  StopReadDeadline();
  beast::error_code ignored;
  stream_.tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.tcp().close();
}

}  // namespace sluice::http
