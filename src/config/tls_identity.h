// The parts of the configuration about TLS identities: rls.tls (the gRPC port's certificate, key
// and client authority) and the lists of client certificate names (a caller's client_san, the
// port's client_san). Pure functions of the YAML, but for checking that the files named can be
// read; the certificates themselves are loaded where they are served (rls/server_tls.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/yaml_fields.h"
#include "sluice/status.h"

namespace sluice::config {

// The longest subject alternative name a list may hold.
inline constexpr size_t kMaxClientSanBytes = 1024;

// The value of `field` of `fields`: a non-empty list of names, each 1 to kMaxClientSanBytes of
// printable ASCII without spaces, none repeated.
Result<std::vector<std::string>> ParseClientSans(const YamlFields& fields, std::string_view field);

// rls.tls: {cert_file, key_file, client_ca_file, client_san}; cert_file and key_file required,
// client_san only with client_ca_file; every file must be readable.
Result<RlsTlsConfig> ParseRlsTls(const YamlReporter& report, const YAML::Node& node);

}  // namespace sluice::config
