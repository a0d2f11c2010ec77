#include "redis/sentinel_link.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

Result<int> ConnectSocket(const std::string& address, Steady::time_point until) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("bad sentinel address");
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::Unavailable("cannot resolve sentinel " + address + ": " + gai_strerror(rc));
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
  return Status::Unavailable("cannot connect to sentinel " + address + ": " + why);
}

}  // namespace

Result<std::unique_ptr<SentinelLink>> SentinelLink::Connect(const std::string& address,
                                                            const std::string& password,
                                                            Duration timeout) {
  auto fd = ConnectSocket(address, Steady::now() + timeout);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<SentinelLink> link(new SentinelLink(*fd, address));
  if (!password.empty()) {
    const std::string_view auth[] = {"AUTH", password};
    auto reply = link->Call(auth, timeout);
    if (!reply.ok()) return reply.status();
    // Sentinel's reply to a wrong password names no secret, but keep to the code alone.
    if (reply->is_error()) {
      return Status::Unavailable("sentinel " + address + " refused the sentinel password (" +
                                 reply->str.substr(0, reply->str.find(' ')) + ")");
    }
  }
  return link;
}

SentinelLink::~SentinelLink() { ::close(fd_); }

Status SentinelLink::Fail(std::string_view why) const {
  return Status::Unavailable("sentinel " + address_ + ": " + std::string(why));
}

Status SentinelLink::Send(std::span<const std::string_view> argv, Duration timeout) {
  std::string bytes;
  AppendCommand(argv, bytes);
  const auto until = Steady::now() + timeout;
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd_, POLLOUT, until)) {
      continue;
    }
    return Fail(n < 0 && errno != EAGAIN ? std::strerror(errno) : "write timed out");
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
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      if (!reader_.Feed(buffer, static_cast<size_t>(n))) return Fail("unreadable reply");
      continue;
    }
    if (n == 0) return Fail("connection closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Fail(std::strerror(errno));
    if (!WaitFor(fd_, POLLIN, until)) return std::optional<Reply>();
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
