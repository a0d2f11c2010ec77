// server.admin_listen: a second HTTP address of `sluice serve` that serves only the operators'
// endpoints (/metrics, /v1/top, the dashboard, DELETE /v1/keys/...) and /healthz, /readyz, so the
// decision port can face a network without them. Parsing only: a pure function of the YAML.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>

#include "config/config.h"
#include "config/yaml_reporter.h"
#include "sluice/status.h"

namespace sluice::config {

// The address the `server` mapping's admin_listen field gives, or nullopt when it has none.
// Refused (file, line, field) when it is not HOST:PORT or is the same address as `listen`.
Result<std::optional<ListenAddress>> ParseAdminListen(const YamlReporter& report,
                                                      const YAML::Node& server,
                                                      const ListenAddress& listen);

// Whether two listeners cannot both bind: the same port (not 0, any free port) on the same host,
// or on hosts of which one is every address ("0.0.0.0", "::").
bool SameListenAddress(const ListenAddress& a, const ListenAddress& b);

}  // namespace sluice::config
