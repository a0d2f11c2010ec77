// The store suites' target in the TLS store test binary: one redis-server, spoken to on its TLS
// port (rediss://) with a certificate of a test authority for 127.0.0.1.
#include "store_test_support.h"
#include "support/certificates.h"

namespace sluice::testing {

const RedisTarget* SharedTarget() {
  static std::unique_ptr<CertificateAuthority> ca = CertificateAuthority::Create();
  if (ca == nullptr) return nullptr;
  static const IssuedCertificate certificate = ca->Issue("localhost", {"IP:127.0.0.1"});
  static std::unique_ptr<RedisServer> server =
      RedisServer::StartTls({.cert_file = certificate.cert_file,
                             .key_file = certificate.key_file,
                             .ca_file = ca->ca_file()});
  if (server == nullptr) return nullptr;
  static const RedisTarget target{server->tls_url(),
                                  {server->port()},
                                  [port = server->port()](std::string_view) { return port; },
                                  {.ca_file = ca->ca_file()}};
  return &target;
}

}  // namespace sluice::testing
