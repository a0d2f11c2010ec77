#include "http/connection_limit.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sluice::http {
namespace {

uint64_t Reserve(uint64_t soft) { return std::min(kReservedFileDescriptors, soft / 4); }

std::string LimitText(FileLimit limit) {
  const auto text = [](uint64_t n) {
    return n == RLIM_INFINITY ? std::string("unlimited") : std::to_string(n);
  };
  return fmt::format("soft {}, hard {}", text(limit.soft), text(limit.hard));
}

}  // namespace

ConnectionPlan PlanConnections(std::optional<size_t> configured, FileLimit limit) {
  ConnectionPlan plan;
  const uint64_t needed = configured.value_or(kDefaultMaxConnections) + kReservedFileDescriptors;
  plan.soft_limit = std::max(limit.soft, std::min(limit.hard, needed));
  const FileLimit running{plan.soft_limit, limit.hard};
  const uint64_t available = plan.soft_limit - Reserve(plan.soft_limit);
  if (configured) {
    plan.max_connections = *configured;
    if (*configured > available) {
      plan.warnings.push_back(fmt::format(
          "server.max_connections {} is above what the file-descriptor limit ({}) allows, about "
          "{} connections: beyond them accepting fails (EMFILE) and new clients wait in the "
          "listen queue; raise the limit (ulimit -n, systemd LimitNOFILE=) or lower "
          "server.max_connections",
          *configured, LimitText(running), available));
    }
    return plan;
  }
  plan.max_connections = static_cast<size_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(kDefaultMaxConnections, available)));
  if (plan.soft_limit < kLowFileLimit) {
    plan.warnings.push_back(
        fmt::format("the file-descriptor limit is low ({}): at most {} connections instead of "
                    "{}; raise it (ulimit -n, systemd LimitNOFILE=) or set "
                    "server.max_connections",
                    LimitText(running), plan.max_connections, kDefaultMaxConnections));
  }
  return plan;
}

size_t SetUpConnectionLimit(std::optional<size_t> configured) {
  rlimit current{};
  if (getrlimit(RLIMIT_NOFILE, &current) != 0) {
    spdlog::warn("cannot read the file-descriptor limit: {}", std::strerror(errno));
    current.rlim_cur = current.rlim_max = RLIM_INFINITY;
  }
  FileLimit limit{current.rlim_cur, current.rlim_max};
  ConnectionPlan plan = PlanConnections(configured, limit);
  if (plan.soft_limit != limit.soft) {
    rlimit raised = current;
    raised.rlim_cur = plan.soft_limit;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      spdlog::info("raised the file-descriptor soft limit from {} to {} for connections",
                   limit.soft, plan.soft_limit);
    } else {
      spdlog::warn("cannot raise the file-descriptor soft limit from {} to {}: {}", limit.soft,
                   plan.soft_limit, std::strerror(errno));
      limit.hard = limit.soft;  // plan within what the process has
      plan = PlanConnections(configured, limit);
    }
  }
  for (const std::string& warning : plan.warnings) spdlog::warn("{}", warning);
  return plan.max_connections;
}

}  // namespace sluice::http
