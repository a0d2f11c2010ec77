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
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/middleware/beast.h"

namespace sluice::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kReadChunk = 4096;
// After refusing a request, the bytes and time spent reading what the client still sends, so
// that it reads the refusal instead of a connection reset.
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);

std::string RefusalResponse(size_t max_connections) {
  const std::string body = fmt::format(
      R"({{"error":"too many connections: the server holds at most {} at once; retry later"}})",
      max_connections);
  return fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
}

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

class Server::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server& server, tcp::socket socket)
      : server_(server),
        peer_(PeerOf(socket)),
        stream_(std::move(socket)),
        buffer_(server.options_.header_limit + server.options_.body_limit + kReadChunk),
        exchange_([this] { OnExchangeDone(); }) {}

  ~Session() { server_.Unregister(this); }

  void Start() {
    server_.Register(this);
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(); });
  }

  // Closes the connection, reclaimed while it waited for a request (Server::ReclaimIdle).
  void Reclaim() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }

  // Closes the connection once the request in flight, if any, is answered.
  void Drain() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->draining_ = true;
      if (!self->busy_) self->stream_.cancel();
    });
  }

 private:
  void WaitForRequest() {
    busy_ = false;
    if (draining_ || server_.draining_.load()) return Close();
    if (buffer_.size() > 0) return ReadRequest();  // pipelined
    server_.EnterIdle(this);
    stream_.expires_after(server_.options_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->buffer_.commit(n);
                              if (!self->server_.LeaveIdle(self.get()) || ec) return self->Close();
                              self->ReadRequest();
                            });
  }

  void ReadRequest() {
    if (parser_) {
      // Reuse the last body's storage.
      body_storage_ = std::move(parser_->release().body());
      body_storage_.clear();
    }
    parser_.emplace(std::piecewise_construct, std::make_tuple(std::move(body_storage_)));
    parser_->header_limit(static_cast<uint32_t>(server_.options_.header_limit));
    parser_->body_limit(server_.options_.body_limit);
    header_bytes_ = 0;
    stream_.expires_after(server_.options_.read_timeout);
    ParseHeader();
  }

  // Beast's header_limit bounds only the part of the header not parsed yet: the request line and
  // the fields its parser took from earlier reads are not counted, so a header arriving in pieces
  // passed well above the limit (12 KB of 8 KiB sent at once). The header is parsed here, piece by
  // piece, never past header_limit bytes in all; the body then by async_read.
  void ParseHeader() {
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

  void OnRead(beast::error_code ec) {
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
    stream_.expires_never();
    in_flight_ = shared_from_this();
    const middleware::BeastRequest client(request, peer_);
    if (server_.api_.Handle({request.method_string(), request.target(), request.body(), &client,
                             caller_, server_.options_.endpoints},
                            exchange_)) {
      WatchClient();
    }
  }

  // While the Api waits for the request's turn, a read stays pending, so that a client that
  // leaves gives up its place in line at once instead of holding it until the wait ends. What
  // the client sends meanwhile (a pipelined request) stays in the buffer for the next parse.
  void WatchClient() {
    if (buffer_.size() + kReadChunk > buffer_.max_size()) return;  // no room to read into
    watching_ = true;
    stream_.async_read_some(
        buffer_.prepare(kReadChunk),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
  }

  void OnWatch(beast::error_code ec, size_t n) {
    buffer_.commit(n);
    watching_ = false;
    if (std::exchange(answer_ready_, false)) return Respond();
    if (!ec) return WatchClient();
    // Gone (or half-closed: it sends nothing more, so it cannot keep the connection either).
    keep_alive_ = false;
    server_.api_.Abandon(exchange_);  // its answer, "cancelled", comes through OnAnswer
  }

  // Answers a request the HTTP layer could not take, then closes the connection.
  void Refuse(int status, std::string_view message) {
    busy_ = true;
    server_.api_.Refuse(status, message, exchange_.response);
    keep_alive_ = false;
    version_ = parser_->is_header_done() ? parser_->get().version() : 11;
    linger_ = true;
    Respond();
  }

  // Runs on any thread, when the Api has answered. From a store's thread, the session (and the
  // server after it) may be gone before dispatch's copies of the executor are: the server waits
  // for them (handing_over_), and nothing here touches the session after dispatch.
  void OnExchangeDone() {
    std::atomic<int>& handing_over = server_.handing_over_;
    handing_over.fetch_add(1, std::memory_order_relaxed);
    net::dispatch(stream_.get_executor(), [self = std::move(in_flight_)] { self->OnAnswer(); });
    if (handing_over.fetch_sub(1, std::memory_order_release) == 1) handing_over.notify_all();
  }

  void OnAnswer() {
    if (!watching_) return Respond();
    // The watching read ends first; OnWatch then responds.
    answer_ready_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }

  void Respond() {
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
    stream_.expires_after(server_.options_.read_timeout);
    bhttp::async_write(
        stream_, response_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    exchange_.response.body = std::move(response_.body());  // keep its capacity
    if (ec) return Close();
    if (linger_) return Linger();
    if (!response_.keep_alive()) return Close();
    WaitForRequest();
  }

  void Linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    buffer_.clear();
    Discard();
  }

  void Discard() {
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > kMaxLingerBytes) return;
                              self->Discard();
                            });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  Server& server_;
  // The connection, as the store's admission knows it: its share is its own.
  const core::FairAdmission::Caller caller_ = NextCaller();
  tcp::endpoint peer_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string body_storage_;
  bhttp::response<bhttp::string_body> response_;
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

Server::Server(ServerOptions options, Api& api)
    : options_(std::move(options)),
      api_(api),
      reclaim_from_(std::max<size_t>(options_.max_connections - options_.max_connections / 10, 1)),
      refusal_(RefusalResponse(options_.max_connections)),
      strand_(net::make_strand(ioc_)),
      acceptor_(strand_),
      accept_backoff_(strand_) {}

Server::~Server() {
  if (work_) Drain();
}

Status Server::Listen() {
  const auto fail = [&](const beast::error_code& ec) {
    return Status::Unavailable(
        fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message()));
  };
  beast::error_code ec;
  tcp::resolver resolver(ioc_);
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
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
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
  accept_backoff_.async_wait([this](beast::error_code) { Accept(); });
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
  std::make_shared<Session>(*this, std::move(socket))->Start();
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
  if (standing.idle != nullptr) return;  // not yet used since Register
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
  work_.emplace(net::make_work_guard(ioc_));
  for (int i = 0; i < std::max(options_.io_threads, 1); ++i) {
    threads_.emplace_back([this] { ioc_.run(); });
  }
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
  std::vector<std::shared_ptr<Session>> live;
  for (const auto& [session, standing] : sessions_) {
    // Null while the session is being destroyed.
    if (auto alive = session->weak_from_this().lock()) live.push_back(std::move(alive));
  }
  // Dropping the last reference to a session unregisters it, which takes mu_.
  lock.Unlock();
  for (auto& session : live) session->Drain();
  live.clear();
  api_.CancelWaits();  // acquires waiting for a slot are answered now, not at their slot
  lock.Lock();
  const auto drain_deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
  while (!sessions_.empty() && std::chrono::steady_clock::now() < drain_deadline) {
    lock.WaitUntil(cv_, drain_deadline);
  }
  const bool drained = sessions_.empty();
  lock.Unlock();
  if (!drained) spdlog::warn("drain timed out; closing the remaining connections");
  Stop();
  spdlog::info("stopped");
}

void Server::Stop() {
  work_.reset();
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (int n = handing_over_.load(std::memory_order_acquire); n != 0;
       n = handing_over_.load(std::memory_order_acquire)) {
    handing_over_.wait(n, std::memory_order_acquire);
  }
}

}  // namespace sluice::http
