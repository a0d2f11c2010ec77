#include "redis/error_reply.h"

#include <algorithm>
#include <string>

namespace sluice::redis {
namespace {

// The error codes by which a server that works says it cannot serve any call now.
constexpr std::string_view kOutageCodes[] = {
    "LOADING", "BUSY",       "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY",
    "MISCONF", "NOREPLICAS", "MOVED",      "ASK",         "NOSCRIPT",
};

std::string_view CodeOf(std::string_view message) {
  return message.substr(0, std::min(message.find(' '), message.size()));
}

}  // namespace

Status ErrorReplyStatus(std::string_view message, std::string_view call) {
  const std::string_view code = CodeOf(message);
  const std::string what = std::string(call) + ": " + std::string(message);
  if (code == "OOM") return Status::ResourceExhausted("Redis is full (maxmemory) for the " + what);
  if (std::find(std::begin(kOutageCodes), std::end(kOutageCodes), code) != std::end(kOutageCodes)) {
    return Status::Unavailable("Redis cannot serve the " + what);
  }
  return Status::Internal("Redis failed the " + what);
}

}  // namespace sluice::redis
