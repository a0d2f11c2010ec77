// SentinelLink: one blocking connection to a Redis Sentinel, for what a SentinelClient asks of
// the sentinels (SENTINEL GET-MASTER-ADDR-BY-NAME) and for its +switch-master subscription. A
// plain socket read and written with poll(): every wait is bounded by the timeout it is given.
// The sentinels' password is sent with AUTH on connecting and never shown in an error.
//
// Thread safety: none; one thread owns a link.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "redis/resp.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::redis {

class SentinelLink {
 public:
  // Connects to "host:port" and logs in with `password` when not empty, all within `timeout`.
  static Result<std::unique_ptr<SentinelLink>> Connect(const std::string& address,
                                                       const std::string& password,
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
  SentinelLink(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  Status Fail(std::string_view why) const;

  int fd_;
  std::string address_;
  ReplyReader reader_;
};

}  // namespace sluice::redis
