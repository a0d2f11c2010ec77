// How many HTTP connections `sluice serve` may hold, given the process's file-descriptor limit
// (RLIMIT_NOFILE). Each connection is a descriptor; the rest of the process (the listening
// socket, the store's connections, epoll, timers, the log) needs some too, so a reserve is kept
// back. Unless the config sets server.max_connections, the bound is kDefaultMaxConnections, or
// less when the limit cannot hold it plus the reserve. The soft limit is raised, at most to the
// hard limit, as far as the bound needs (common practice: the hard limit is what the operator
// allows); a warning says when the limit is low or cannot hold a configured bound, beyond which
// accepting fails with EMFILE (the server then pauses its accepts, see http/server.h).
//
// PlanConnections is a pure function of its arguments; SetUpConnectionLimit reads and sets the
// process's limit, and is meant to be called once at start, before threads open descriptors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::http {

inline constexpr size_t kDefaultMaxConnections = 10'000;
// Below this soft limit (after raising it) the default bound is lowered, with a warning.
inline constexpr uint64_t kLowFileLimit = 4096;
// The descriptors kept back from connections, when the limit allows; a quarter of it otherwise.
inline constexpr uint64_t kReservedFileDescriptors = 128;

// RLIMIT_NOFILE; RLIM_INFINITY is the largest uint64_t.
struct FileLimit {
  uint64_t soft = 0;
  uint64_t hard = 0;
};

struct ConnectionPlan {
  size_t max_connections = 0;
  // The soft limit to run with: `limit.soft`, or higher when the bound needs it.
  uint64_t soft_limit = 0;
  std::vector<std::string> warnings;
};

// `configured`: server.max_connections, if the config sets it.
ConnectionPlan PlanConnections(std::optional<size_t> configured, FileLimit limit);

// Plans with the process's limit, raises its soft limit as planned, logs the plan's warnings (and
// the raise) and returns the bound on connections.
size_t SetUpConnectionLimit(std::optional<size_t> configured);

}  // namespace sluice::http
