// TLS on the rate limit service's gRPC port (rls.tls) with gRPC's own TLS credentials. sluice
// reads the certificate chain and key itself (tls/rotating_context.h: re-read when the files
// change, and on SIGHUP) and takes a pair only once the key is the certificate's; gRPC's
// FileWatcherCertificateProvider reads the pair taken, and the authorities clients' certificates
// must chain to (mutual TLS), from in-memory files every kTlsRefreshInterval (tls/pem_file.h). A
// rotation reaches the connections made within two intervals of it; established connections keep
// their certificate and are not dropped. A rotation caught half done (a certificate written, its
// key not yet; an authority file half written) is reported and not taken: the previous files are
// served until the rotation is whole. With client_san, the handshake itself refuses a client
// certificate that carries none of those DNS or URI names.
//
// Thread safety: every method may be called concurrently; the credentials may be shared by any
// number of servers while this lives.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <chrono>
#include <memory>

#include "config/config.h"
#include "sluice/status.h"
#include "tls/pem_file.h"
#include "tls/rotating_context.h"

namespace sluice::rls {

inline constexpr std::chrono::seconds kTlsRefreshInterval{1};

class ServerTls {
 public:
  // INVALID_ARGUMENT, naming the field and the file (never the key's contents), unless the files
  // of `tls` hold a PEM certificate whose key is the PEM key, and a PEM authority when one is
  // named.
  static Result<std::unique_ptr<ServerTls>> Load(const config::RlsTlsConfig& tls);
  ~ServerTls();

  // The credentials of a port serving the files.
  std::shared_ptr<grpc::ServerCredentials> Credentials() const;

  // Reads the files now (SIGHUP) rather than at the next poll; a failure is returned and logged,
  // and the previous pair stays.
  Status Reload();

 private:
  ServerTls(config::RlsTlsConfig tls, std::unique_ptr<tls::PemFile> identity,
            std::unique_ptr<tls::PemFile> authorities)
      : config_(std::move(tls)),
        identity_(std::move(identity)),
        authorities_(std::move(authorities)) {}

  const config::RlsTlsConfig config_;
  const std::unique_ptr<tls::PemFile> identity_;
  const std::unique_ptr<tls::PemFile> authorities_;  // with client_ca_file (mutual TLS) only
  std::unique_ptr<tls::RotatingContext> files_;      // writes identity_ and authorities_
};

}  // namespace sluice::rls
