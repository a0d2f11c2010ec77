// store.tls of `sluice serve`'s config: the TLS material of a rediss:// or rediss+cluster:// store
// (sluice/redis_tls.h), its files checked as they are read, so that a file missing, unreadable or
// not what it should be refuses the config (at start, and on SIGHUP, where the old one stays).
//
//   store:
//     url: rediss://cache.example:6380
//     tls: { ca_file: /etc/sluice/redis-ca.pem, cert_file: ..., key_file: ...,
//            server_name: cache.example, insecure_skip_verify: false }
//
// A plain function of its input.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string_view>

#include "config/yaml_fields.h"
#include "sluice/redis_tls.h"
#include "sluice/status.h"

namespace sluice::config {

// `tls` is store.tls's node; `store_url` the store's URL, which must be a TLS one.
Result<RedisTlsOptions> ParseStoreTls(const YamlReporter& report, const YAML::Node& tls,
                                      std::string_view store_url);

}  // namespace sluice::config
