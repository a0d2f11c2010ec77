// Where a TLS server's certificate, key and client authority are: the `tls` section of a port in
// the configuration. A plain value.
#pragma once

#include <string>

namespace sluice::tls {

struct ServerFiles {
  std::string cert_file;       // PEM: the certificate, then the chain up to the authority
  std::string key_file;        // PEM: its private key, unencrypted
  std::string client_ca_file;  // PEM: the authorities clients' certificates must come from;
                               // empty: clients present none (no mTLS)

  bool operator==(const ServerFiles&) const = default;
};

}  // namespace sluice::tls
