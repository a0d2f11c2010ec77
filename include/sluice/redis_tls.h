// RedisTlsOptions: the TLS material of a connection to Redis over TLS (the URL schemes rediss://,
// rediss+cluster:// and rediss+sentinel://), as files read when the store is created and again on
// RedisStore::ReloadTls. Verification is on: the server's certificate must chain to `ca_file` (or
// the system's store), be valid now, and name `server_name`; a connection that fails it fails
// with the cause (OpenSSL's verify result), and nothing is ever sent in plain text instead.
//
// Thread safety: a plain value.
#pragma once

#include <string>

namespace sluice {

struct RedisTlsOptions {
  // PEM certificate authorities the server's certificate must chain to; empty: the system's.
  std::string ca_file{};
  // A client certificate (PEM, with its chain) and its unencrypted PEM key, for a server that
  // verifies its clients (tls-auth-clients yes). Both or neither.
  std::string cert_file{};
  std::string key_file{};
  // The name sent in SNI and verified in the server's certificate (a DNS name, or an IP address
  // checked against the certificate's IP addresses); empty: the URL's host. On a Redis Cluster,
  // see docs/security.md for the name each node is verified against.
  std::string server_name{};
  // Accepts any certificate from the server, unverified: only for tests against throwaway
  // servers. The connection is still encrypted but anyone on the path can read and alter it.
  bool insecure_skip_verify = false;
};

}  // namespace sluice
