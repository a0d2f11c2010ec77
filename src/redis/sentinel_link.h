// SentinelLink: one blocking connection to a Redis Sentinel, for what a SentinelClient asks of
// the sentinels (SENTINEL GET-MASTER-ADDR-BY-NAME) and for its +switch-master subscription, or to
// the replica the sentinels promote, which it asks for its ROLE until it says master. A
// socket, plain or TLS (OpenSSL over the same socket), read and written with poll(): every wait
// is bounded by the timeout it is given. The sentinels' user and password are sent with AUTH on
// connecting (the master's, to a data server) and never shown in an error.
//
// Thread safety: none; one thread owns a link.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "redis/resp.h"
#include "redis/tls_context.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::redis {

// How to reach and log in to a sentinel, or to a data server with the master's access.
struct SentinelAccess {
  // What the server is called in errors: "sentinel", or "server" for a data server.
  std::string peer = "sentinel";
  // AUTH [user] password on connecting, when `password` is not empty (Sentinel's requirepass, or
  // an ACL user of the sentinels).
  std::string user{};
  std::string password{};
  // TLS when set, with the context's current files; the sentinel's certificate must name its
  // host when that is a name, else `tls_server_name` when set, else its IP address.
  std::shared_ptr<TlsContext> tls{};
  std::string tls_server_name{};
};

// The name a server at `host` is verified against over TLS: `host` when it is a name, else
// `server_name` when set, else `host` (an IP address).
std::string TlsNameFor(const std::string& host, const std::string& server_name);

class SentinelLink {
 public:
  // Connects to "host:port", with TLS's handshake when `access` says so, and logs in, all within
  // `timeout`.
  static Result<std::unique_ptr<SentinelLink>> Connect(const std::string& address,
                                                       const SentinelAccess& access,
                                                       Duration timeout);
  ~SentinelLink();
  SentinelLink(const SentinelLink&) = delete;
  SentinelLink& operator=(const SentinelLink&) = delete;

  // One command and its reply, within `timeout`.
  Result<Reply> Call(std::span<const std::string_view> argv, Duration timeout);
  // One command, its reply (or messages) left to Next.
  Status Send(std::span<const std::string_view> argv, Duration timeout);
  // The next reply or message, waiting at most `timeout` for one; nullopt when none came. An
  // error when the connection broke: the link is then unusable.
  Result<std::optional<Reply>> Next(Duration timeout);

  int fd() const { return fd_; }
  const std::string& address() const { return address_; }

 private:
  struct Tls;

  SentinelLink(int fd, std::string peer, std::string address);
  Status Fail(std::string_view why) const;
  Status Handshake(const SentinelAccess& access, const std::string& host, Duration timeout);
  // Bytes sent or read, 0 when the socket would block (`wait` says for what), or an error.
  Result<size_t> Write(const char* data, size_t size, short& wait);
  Result<size_t> Read(char* data, size_t size, short& wait);
  // What an SSL_write or SSL_read that returned `n` did: its bytes; none, with `wait` set to what
  // the socket must be ready for; or the failure.
  Result<size_t> TlsTransferred(int n, short& wait) const;

  int fd_;
  std::string peer_;
  std::string address_;
  std::unique_ptr<Tls> tls_;
  ReplyReader reader_;
};

}  // namespace sluice::redis
