#include <string>
#include <utility>

#include "config/sections.h"
#include "config/tls_files.h"

namespace sluice::config {
namespace {

constexpr int kMaxIoThreads = 256;

}  // namespace

Status ParseServerSection(const Reporter& report, const YAML::Node& node, ServerConfig& server) {
  Fields fields(report, node, "server");
  if (Status s = fields.Check({"io_threads", "read_timeout", "idle_timeout", "max_connections",
                               "max_waiters", "max_waiters_per_key", "expose_keys", "shadow_mode",
                               "auth", "admin_listen", "tls"});
      !s.ok()) {
    return s;
  }
  if (const YAML::Node threads = fields.Get("io_threads"); threads.IsDefined()) {
    auto n = fields.ReadInteger(threads, "io_threads");
    if (!n.ok()) return n.status();
    if (*n < 1 || *n > kMaxIoThreads) {
      return report.At(threads, fields.Path("io_threads"),
                       "must be between 1 and " + std::to_string(kMaxIoThreads));
    }
    server.io_threads = static_cast<int>(*n);
  }
  for (auto [field, target] : {std::pair{"read_timeout", &server.read_timeout},
                               std::pair{"idle_timeout", &server.idle_timeout}}) {
    const YAML::Node duration = fields.Get(field);
    if (!duration.IsDefined()) continue;
    auto d = fields.ReadDuration(duration, field);
    if (!d.ok()) return d.status();
    if (*d < std::chrono::milliseconds(1)) {
      return report.At(duration, fields.Path(field), "must be at least 1ms");
    }
    *target = *d;
  }
  if (const YAML::Node max = fields.Get("max_connections"); max.IsDefined()) {
    auto n = fields.ReadInteger(max, "max_connections");
    if (!n.ok()) return n.status();
    if (*n < 1 || static_cast<uint64_t>(*n) > kMaxConnectionsBound) {
      return report.At(max, fields.Path("max_connections"),
                       "must be between 1 and " + std::to_string(kMaxConnectionsBound));
    }
    server.max_connections = static_cast<size_t>(*n);
  }
  if (Status s = fields.ReadWaitersBounds(server); !s.ok()) return s;
  if (Status s = fields.ReadOptionalBool("expose_keys", server.expose_keys); !s.ok()) return s;
  if (Status s = fields.ReadOptionalBool("shadow_mode", server.shadow_mode); !s.ok()) return s;
  if (const YAML::Node tls = fields.Get("tls"); tls.IsDefined()) {
    auto files = ParseTlsFiles(report, tls, fields.Path("tls"));
    if (!files.ok()) return files.status();
    server.tls = std::move(*files);
  }
  return Status::Ok();
}

}  // namespace sluice::config
