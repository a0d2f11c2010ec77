#include <string>
#include <utility>

#include "config/sections.h"
#include "config/tls_identity.h"

namespace sluice::config {

Result<RlsConfig> ParseRlsSection(const Reporter& report, const YAML::Node& node) {
  Fields fields(report, node, "rls");
  if (Status s = fields.Check({"config_dir", "grpc_listen", "tls", "shadow_mode", "quota_mode",
                               "x_ratelimit_headers", "on_error", "watch"});
      !s.ok()) {
    return s;
  }
  RlsConfig rls;
  const YAML::Node dir = fields.Get("config_dir");
  if (!dir.IsDefined()) return fields.Missing("config_dir");
  auto dir_text = fields.ReadString(dir, "config_dir");
  if (!dir_text.ok()) return dir_text.status();
  if (dir_text->empty()) return report.At(dir, fields.Path("config_dir"), "must not be empty");
  rls.config_dir = *dir_text;
  if (const YAML::Node listen = fields.Get("grpc_listen"); listen.IsDefined()) {
    auto text = fields.ReadString(listen, "grpc_listen");
    if (!text.ok()) return text.status();
    auto address = ParseListenAddress(*text);
    if (!address.ok()) {
      return report.At(listen, fields.Path("grpc_listen"), address.status().message());
    }
    rls.grpc_listen = *address;
  }
  if (const YAML::Node tls = fields.Get("tls"); tls.IsDefined()) {
    if (!rls.grpc_listen) return report.At(tls, fields.Path("tls"), "needs grpc_listen");
    auto parsed = ParseRlsTls(report, tls);
    if (!parsed.ok()) return parsed.status();
    rls.tls = std::move(*parsed);
  }
  for (auto [field, target] :
       {std::pair{"shadow_mode", &rls.shadow_mode}, std::pair{"quota_mode", &rls.quota_mode},
        std::pair{"x_ratelimit_headers", &rls.x_ratelimit_headers},
        std::pair{"watch", &rls.watch}}) {
    if (Status s = fields.ReadOptionalBool(field, *target); !s.ok()) return s;
  }
  if (const YAML::Node policy_node = fields.Get("on_error"); policy_node.IsDefined()) {
    auto name = fields.ReadString(policy_node, "on_error");
    if (!name.ok()) return name.status();
    if (*name == "error") {
      rls.on_error.reset();
    } else {
      auto policy = ParseFailurePolicy(*name);
      if (!policy.ok()) {
        return report.At(policy_node, fields.Path("on_error"),
                         policy.status().message() + " (or error)");
      }
      rls.on_error = *policy;
    }
  }
  return rls;
}

}  // namespace sluice::config
