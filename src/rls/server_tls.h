// TLS on the rate limit service's gRPC port (rls.tls) with gRPC's own TLS credentials: the
// certificate chain and key, and for mutual TLS the authority clients' certificates must chain to,
// read by gRPC's FileWatcherCertificateProvider, which re-reads the files every
// kTlsRefreshInterval. A changed file (a rotation, whether or not followed by a SIGHUP) is served
// to the connections made after it is read; established connections keep theirs and are not
// dropped. gRPC 1.51's watcher does not check that a new key matches the new certificate: a pair
// read mid-rotation (the certificate written, its key not yet) fails new handshakes until both
// are in place, hence rotations by swapping a symlinked directory, and CheckTlsFiles on SIGHUP to
// report such a pair. With client_san, the handshake itself refuses a client certificate that
// carries none of those DNS or URI names.
//
// Thread safety: plain functions; the credentials may be shared by any number of servers.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <chrono>
#include <memory>

#include "config/config.h"
#include "sluice/status.h"

namespace sluice::rls {

inline constexpr std::chrono::seconds kTlsRefreshInterval{1};

// Whether the files of `tls` hold what TLS needs: a PEM certificate whose key is the PEM key,
// and a PEM authority when one is named; INVALID_ARGUMENT naming the field and file otherwise
// (never the key's contents). At start, and on SIGHUP so that a bad rotation is reported.
Status CheckTlsFiles(const config::RlsTlsConfig& tls);

// The credentials of a port serving `tls` (checked with CheckTlsFiles first).
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const config::RlsTlsConfig& tls);

}  // namespace sluice::rls
