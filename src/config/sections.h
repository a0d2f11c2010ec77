// The sections of `sluice serve`'s configuration file, each read by a file of its own;
// config.cc reads the document and calls them in order. Each error names the file, the line and
// the field. Stateless; safe from any thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include "config/config.h"
#include "config/config_fields.h"

namespace sluice::config {

// store: {url, timeout_ms, instances, max_memory, key_prefix, password_file | password_env}
// (config_store.cc).
Status ParseStoreSection(const Reporter& report, const YAML::Node& node, StoreConfig& store);

// server: its fields but `auth`, which names rules and is read after them (config_server.cc).
Status ParseServerSection(const Reporter& report, const YAML::Node& node, ServerConfig& server);

// forward_auth: {trusted_proxies, client_prefixes} (config_rules.cc).
Status ParseForwardAuthSection(const Reporter& report, const YAML::Node& node,
                               ForwardAuthConfig& auth);

// rules: the list, read after store, server, forward_auth and rls (config_rules.cc).
Status ParseRulesSection(const Reporter& report, const YAML::Node& rules, Config& config);

// server.auth: {callers: [...]}, read after the rules it names (config_auth.cc).
Status ParseAuthSection(const Reporter& report, const YAML::Node& node, Config& config);

// rls: Envoy's rate limit service (config_rls.cc).
Result<RlsConfig> ParseRlsSection(const Reporter& report, const YAML::Node& node);

}  // namespace sluice::config
