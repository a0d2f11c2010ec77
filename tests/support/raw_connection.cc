#include "support/raw_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>

namespace sluice::testing {

RawConnection::RawConnection(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
  if (fd_ < 0) return;
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Close();
}

bool RawConnection::Send(std::string_view bytes) const {
  return fd_ >= 0 &&
         send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

std::string RawConnection::ReadToEnd() const { return ReadAll(0); }

std::string RawConnection::ReadableBytes() const { return ReadAll(MSG_DONTWAIT); }

std::string RawConnection::ReadAll(int flags) const {
  std::string out;
  char buf[4096];
  for (ssize_t n; fd_ >= 0 && (n = recv(fd_, buf, sizeof buf, flags)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string RawConnection::ReadResponse() const {
  std::string out;
  char buf[4096];
  for (ssize_t n; fd_ >= 0 && (n = recv(fd_, buf, sizeof buf, 0)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
    const size_t head_end = out.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    constexpr std::string_view kLength = "Content-Length: ";
    const size_t length_at = out.find(kLength);
    if (length_at == std::string::npos || length_at > head_end) break;
    const size_t length = std::stoul(out.substr(length_at + kLength.size()));
    if (out.size() >= head_end + 4 + length) break;
  }
  return out;
}

bool RawConnection::ClosedByServer(std::chrono::milliseconds timeout) const {
  pollfd p{.fd = fd_, .events = POLLIN | POLLRDHUP, .revents = 0};
  if (fd_ < 0 || poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
  char byte;
  return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

void RawConnection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::string RawPost(std::string_view target, std::string_view body) {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         std::string(body);
}

std::string RawExchange(int port, std::string_view bytes) {
  RawConnection connection(port);
  return connection.Send(bytes) ? connection.ReadToEnd() : "";
}

}  // namespace sluice::testing
