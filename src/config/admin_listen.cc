#include "config/admin_listen.h"

#include <string>

#include "config/yaml_fields.h"

namespace sluice::config {
namespace {

bool EveryAddress(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

}  // namespace

bool SameListenAddress(const ListenAddress& a, const ListenAddress& b) {
  if (a.port != b.port || a.port == 0) return false;
  return a.host == b.host || EveryAddress(a.host) || EveryAddress(b.host);
}

Result<std::optional<ListenAddress>> ParseAdminListen(const YamlReporter& report,
                                                      const YAML::Node& server,
                                                      const ListenAddress& listen) {
  const YamlFields fields(report, server, "server");
  const YAML::Node node = fields.Get("admin_listen");
  if (!node.IsDefined()) return std::optional<ListenAddress>();
  auto text = fields.ReadString(node, "admin_listen");
  if (!text.ok()) return text.status();
  auto address = ParseListenAddress(*text);
  if (!address.ok()) {
    return report.At(node, fields.Path("admin_listen"), address.status().message());
  }
  if (SameListenAddress(*address, listen)) {
    return report.At(node, fields.Path("admin_listen"),
                     "must differ from listen (" + listen.ToString() +
                         "): the admin endpoints move to their own address");
  }
  return std::optional<ListenAddress>(*address);
}

}  // namespace sluice::config
