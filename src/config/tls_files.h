// The `tls` section of a port in the serve configuration:
//
//   tls: { cert_file: /etc/sluice/tls.crt, key_file: /etc/sluice/tls.key,
//          client_ca_file: /etc/sluice/clients-ca.crt }              # the last optional: mTLS
//
// The files are read to check that they make a TLS context (tls/server_context.h): a file that
// cannot be read or used, or a key that is not the certificate's, is an error naming the config
// file, the line and the field. Not synchronised; reads the files named.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "config/yaml_reporter.h"
#include "sluice/status.h"
#include "tls/server_files.h"

namespace sluice::config {

// `path` names the section in errors ("server.tls").
Result<tls::ServerFiles> ParseTlsFiles(const YamlReporter& report, const YAML::Node& node,
                                       const std::string& path);

}  // namespace sluice::config
