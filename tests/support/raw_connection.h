// A TCP connection to a server on 127.0.0.1 for what an HTTP client hides: pipelining, leaving
// with a request unanswered, a request sent in part, a connection left silent, a server that
// closes it. Blocking, with 10 s timeouts on each read. Not thread-safe: one owner.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace sluice::testing {

class RawConnection {
 public:
  // Connects at once; connected() says whether it did.
  explicit RawConnection(int port);
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool Send(std::string_view bytes) const;
  // Everything read until the server closes the connection (or 10 s pass without a byte).
  std::string ReadToEnd() const;
  // One HTTP response with a Content-Length, read whole; what was read if the connection ends
  // (or 10 s pass without a byte) before.
  std::string ReadResponse() const;
  // The bytes there to read now, without waiting.
  std::string ReadableBytes() const;
  // Whether the server closes the connection (or resets it) within `timeout`, sending nothing
  // (bytes sent, already there or arriving, make it false).
  bool ClosedByServer(std::chrono::milliseconds timeout) const;
  void Close();

 private:
  // What recv with `flags` reads until the connection ends, a timeout or (MSG_DONTWAIT) nothing
  // more is there.
  std::string ReadAll(int flags) const;

  int fd_;
};

// "POST target" with the body, keeping the connection alive.
std::string RawPost(std::string_view target, std::string_view body);

// Sends raw bytes on a new connection and returns everything read until the server closes it.
std::string RawExchange(int port, std::string_view bytes);

}  // namespace sluice::testing
