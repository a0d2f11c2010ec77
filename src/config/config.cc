#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <utility>

#include "config/admin_listen.h"
#include "config/sections.h"

namespace sluice::config {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

Result<Config> ParseDocument(const Reporter& report, const YAML::Node& root) {
  Config config;
  Fields top(report, root, "");
  if (Status s = top.Check(
          {"listen", "max_sliding_log_limit", "store", "server", "forward_auth", "rules", "rls"});
      !s.ok()) {
    return s;
  }

  if (const YAML::Node max = top.Get("max_sliding_log_limit"); max.IsDefined()) {
    auto n = top.ReadInteger(max, "max_sliding_log_limit");
    if (!n.ok()) return n.status();
    if (*n < 1 || *n > Limit::kMaxSlidingLogCount) {
      return report.At(max, "max_sliding_log_limit",
                       "must be between 1 and " + std::to_string(Limit::kMaxSlidingLogCount));
    }
    config.max_sliding_log_limit = *n;
  }

  if (const YAML::Node listen = top.Get("listen"); listen.IsDefined()) {
    auto text = top.ReadString(listen, "listen");
    if (!text.ok()) return text.status();
    auto address = ParseListenAddress(*text);
    if (!address.ok()) return report.At(listen, "listen", address.status().message());
    config.listen = *address;
  }

  if (const YAML::Node store = top.Get("store"); store.IsDefined()) {
    if (Status s = ParseStoreSection(report, store, config.store); !s.ok()) return s;
  }

  if (const YAML::Node server = top.Get("server"); server.IsDefined()) {
    if (Status s = ParseServerSection(report, server, config.server); !s.ok()) return s;
  }

  if (const YAML::Node auth = top.Get("forward_auth"); auth.IsDefined()) {
    if (Status s = ParseForwardAuthSection(report, auth, config.forward_auth); !s.ok()) return s;
  }

  if (const YAML::Node rls = top.Get("rls"); rls.IsDefined()) {
    auto parsed = ParseRlsSection(report, rls);
    if (!parsed.ok()) return parsed.status();
    config.rls = std::move(*parsed);
  }

  // Either the rules or the rls section may be empty when the other is set: a replacement for
  // envoyproxy/ratelimit has no sluice rules to write.
  const bool serves_rls = !config.rls.config_dir.empty();
  const YAML::Node rules = top.Get("rules");
  if (!rules.IsDefined()) {
    if (serves_rls) return config;
    return top.Missing("rules");
  }
  if (!rules.IsSequence() || (rules.size() == 0 && !serves_rls)) {
    return report.At(rules, "rules",
                     serves_rls ? "expected a list of rules"
                                : "expected a non-empty list of rules, or an rls section");
  }
  if (Status s = ParseRulesSection(report, rules, config); !s.ok()) return s;
  if (const YAML::Node server = top.Get("server"); server.IsDefined()) {
    if (const YAML::Node auth = Fields(report, server, "server").Get("auth"); auth.IsDefined()) {
      if (Status s = ParseAuthSection(report, auth, config); !s.ok()) return s;
    }
    auto admin_listen = ParseAdminListen(report, server, config.listen);
    if (!admin_listen.ok()) return admin_listen.status();
    config.server.admin_listen = *admin_listen;
  }
  return config;
}

}  // namespace

std::string ListenAddress::ToString() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("bad listen address '" + std::string(text) +
                                   "': " + std::string(why));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("expected HOST:PORT");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("write an IPv6 address in brackets: [::1]:8080");
  }
  if (host.empty()) return bad("missing host");
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return bad("port must be a number from 0 to 65535");
  }
  return ListenAddress{std::string(host), static_cast<uint16_t>(port)};
}

Result<Config> ParseConfig(std::string_view yaml, std::string_view file_name) {
  const Reporter report(file_name);
  auto root = ParseYaml(yaml, report);
  if (!root.ok()) return root.status();
  if (!root->IsDefined() || root->IsNull()) {
    return report.At(YAML::Mark(), "(top level)", "the file is empty");
  }
  try {
    return ParseDocument(report, *root);
  } catch (const YAML::Exception& e) {
    return report.At(e.mark, "(syntax)", e.msg);
  }
}

Result<Config> LoadConfigFile(const std::string& path) {
  auto text = ReadYamlFile(path, "config file", kMaxConfigBytes);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

}  // namespace sluice::config
