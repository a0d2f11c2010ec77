#include "redis/sentinel_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/sigpipe.h"

namespace sluice::redis {
namespace {

using Steady = std::chrono::steady_clock;

int MillisLeft(Steady::time_point until) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Steady::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Waits until `fd` is ready for `events` or `until` passes; false when it passed.
bool WaitFor(int fd, short events, Steady::time_point until) {
  while (true) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int n = ::poll(&p, 1, MillisLeft(until));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

Result<int> ConnectSocket(const std::string& peer, const std::string& address,
                          Steady::time_point until) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("bad " + peer + " address");
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::Unavailable("cannot resolve " + peer + " " + address + ": " + gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ||
        (errno == EINPROGRESS && WaitFor(fd, POLLOUT, until))) {
      int error = 0;
      socklen_t size = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      if (error == 0) {
        ::freeaddrinfo(found);
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      why = std::strerror(error);
    } else {
      why = errno == EINPROGRESS ? "timed out" : std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return Status::Unavailable("cannot connect to " + peer + " " + address + ": " + why);
}

bool IsIpAddress(const std::string& host) {
  unsigned char any[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), any) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), any) == 1;
}

std::string OpenSslReason() {
  const unsigned long code = ::ERR_get_error();
  ::ERR_clear_error();
  if (code == 0) return "the connection was closed";
  char text[256];
  ::ERR_error_string_n(code, text, sizeof text);
  return text;
}

}  // namespace

std::string TlsNameFor(const std::string& host, const std::string& server_name) {
  return IsIpAddress(host) && !server_name.empty() ? server_name : host;
}

struct SentinelLink::Tls {
  ~Tls() {
    if (ssl != nullptr) ::SSL_free(ssl);
  }
  // Held while `ssl` is: it uses the context.
  std::shared_ptr<boost::asio::ssl::context> context;
  SSL* ssl = nullptr;
  std::string name;
  bool verify = true;
};

SentinelLink::SentinelLink(int fd, std::string peer, std::string address)
    : fd_(fd), peer_(std::move(peer)), address_(std::move(address)) {}

Result<std::unique_ptr<SentinelLink>> SentinelLink::Connect(const std::string& address,
                                                            const SentinelAccess& access,
                                                            Duration timeout) {
  const auto until = Steady::now() + timeout;
  auto fd = ConnectSocket(access.peer, address, until);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<SentinelLink> link(new SentinelLink(*fd, access.peer, address));
  if (access.tls != nullptr) {
    const std::string host = address.substr(0, address.rfind(':'));
    if (Status s = link->Handshake(access, host, timeout); !s.ok()) return s;
  }
  if (!access.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!access.user.empty()) auth.push_back(access.user);
    auth.push_back(access.password);
    auto reply = link->Call(auth, std::chrono::duration_cast<Duration>(until - Steady::now()));
    if (!reply.ok()) return reply.status();
    // A reply to a wrong password names no secret, but keep to the code alone.
    if (reply->is_error()) {
      return Status::Unavailable(access.peer + " " + address + " refused the " +
                                 (access.user.empty() ? "password" : "user's login") + " (" +
                                 reply->str.substr(0, reply->str.find(' ')) + ")");
    }
  }
  return link;
}

Status SentinelLink::Handshake(const SentinelAccess& access, const std::string& host,
                               Duration timeout) {
  tls_ = std::make_unique<Tls>();
  tls_->context = access.tls->Current();
  tls_->verify = access.tls->verify();
  tls_->name = TlsNameFor(host, access.tls_server_name);
  tls_->ssl = ::SSL_new(tls_->context->native_handle());
  if (tls_->ssl == nullptr) return Fail("TLS: " + OpenSslReason());
  ::SSL_set_fd(tls_->ssl, fd_);
  X509_VERIFY_PARAM* param = ::SSL_get0_param(tls_->ssl);
  // SNI carries host names only (RFC 6066); an IP address is checked against the certificate's.
  if (IsIpAddress(tls_->name)) {
    ::X509_VERIFY_PARAM_set1_ip_asc(param, tls_->name.c_str());
  } else {
    ::SSL_set_tlsext_host_name(tls_->ssl, tls_->name.c_str());
    ::X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ::X509_VERIFY_PARAM_set1_host(param, tls_->name.c_str(), tls_->name.size());
  }
  const auto until = Steady::now() + timeout;
  while (true) {
    ::ERR_clear_error();
    const base::SigpipeBlocked blocked;  // OpenSSL writes with write(2)
    const int rc = ::SSL_connect(tls_->ssl);
    if (rc == 1) return Status::Ok();
    const int error = ::SSL_get_error(tls_->ssl, rc);
    const short wait = error == SSL_ERROR_WANT_READ    ? POLLIN
                       : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                       : 0;
    if (wait != 0) {
      if (WaitFor(fd_, wait, until)) continue;
      return Fail("TLS handshake timed out");
    }
    if (tls_->verify) {
      const long result = ::SSL_get_verify_result(tls_->ssl);
      if (result != X509_V_OK) {
        ::ERR_clear_error();
        return Fail("TLS handshake failed: the server's certificate was refused: " +
                    std::string(::X509_verify_cert_error_string(result)) +
                    " (verifying the name '" + tls_->name + "')");
      }
    }
    return Fail("TLS handshake failed: " + OpenSslReason());
  }
}

SentinelLink::~SentinelLink() {
  tls_.reset();
  ::close(fd_);
}

Status SentinelLink::Fail(std::string_view why) const {
  return Status::Unavailable(peer_ + " " + address_ + ": " + std::string(why));
}

Result<size_t> SentinelLink::TlsTransferred(int n, short& wait) const {
  if (n > 0) return static_cast<size_t>(n);
  const int error = ::SSL_get_error(tls_->ssl, n);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    wait = error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    return size_t{0};
  }
  if (error == SSL_ERROR_ZERO_RETURN) return Fail("connection closed");
  return Fail("TLS: " + OpenSslReason());
}

Result<size_t> SentinelLink::Write(const char* data, size_t size, short& wait) {
  if (tls_ != nullptr) {
    ::ERR_clear_error();
    const base::SigpipeBlocked blocked;  // a peer gone is an error, not the process's end
    return TlsTransferred(::SSL_write(tls_->ssl, data, static_cast<int>(size)), wait);
  }
  while (true) {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait = POLLOUT;
      return size_t{0};
    }
    return Fail(std::strerror(errno));
  }
}

Result<size_t> SentinelLink::Read(char* data, size_t size, short& wait) {
  if (tls_ != nullptr) {
    ::ERR_clear_error();
    const base::SigpipeBlocked blocked;  // a read may write (a TLS 1.3 key update's answer)
    return TlsTransferred(::SSL_read(tls_->ssl, data, static_cast<int>(size)), wait);
  }
  while (true) {
    const ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return Fail("connection closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait = POLLIN;
      return size_t{0};
    }
    return Fail(std::strerror(errno));
  }
}

Status SentinelLink::Send(std::span<const std::string_view> argv, Duration timeout) {
  std::string bytes;
  AppendCommand(argv, bytes);
  const auto until = Steady::now() + timeout;
  size_t sent = 0;
  while (sent < bytes.size()) {
    short wait = 0;
    auto n = Write(bytes.data() + sent, bytes.size() - sent, wait);
    if (!n.ok()) return n.status();
    sent += *n;
    if (*n == 0 && !WaitFor(fd_, wait, until)) return Fail("write timed out");
  }
  return Status::Ok();
}

Result<std::optional<Reply>> SentinelLink::Next(Duration timeout) {
  const auto until = Steady::now() + timeout;
  while (true) {
    auto next = reader_.Next();
    if (!next.ok()) return Fail(next.status().message());
    if (next->has_value()) return next;
    char buffer[4096];
    short wait = 0;
    auto n = Read(buffer, sizeof buffer, wait);
    if (!n.ok()) return n.status();
    if (*n > 0) {
      if (!reader_.Feed(buffer, *n)) return Fail("unreadable reply");
      continue;
    }
    if (!WaitFor(fd_, wait, until)) return std::optional<Reply>();
  }
}

Result<Reply> SentinelLink::Call(std::span<const std::string_view> argv, Duration timeout) {
  const auto until = Steady::now() + timeout;
  if (Status s = Send(argv, timeout); !s.ok()) return s;
  auto reply = Next(std::chrono::duration_cast<Duration>(until - Steady::now()));
  if (!reply.ok()) return reply.status();
  if (!reply->has_value()) return Fail("no reply within the timeout");
  return std::move(**reply);
}

}  // namespace sluice::redis
