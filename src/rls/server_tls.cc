#include "rls/server_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rls {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Status Bad(std::string_view field, const std::string& path, std::string_view why) {
  ERR_clear_error();  // OpenSSL's queue says nothing the message does not
  return Status::InvalidArgument("rls.tls." + std::string(field) + " '" + path +
                                 "': " + std::string(why));
}

Result<Certificate> ReadCertificate(std::string_view field, const std::string& path) {
  Bio bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return Bad(field, path, "cannot be read");
  Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return Bad(field, path, "holds no PEM certificate");
  return cert;
}

// Only client certificates carrying one of `sans_` as a DNS or URI name complete the handshake
// (the chain has been verified against the authority before this is asked).
class ClientSanVerifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit ClientSanVerifier(std::vector<std::string> sans) : sans_(std::move(sans)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/, grpc::Status* sync_status) override {
    const auto listed = [&](const grpc::string_ref& name) {
      return std::ranges::find(sans_, std::string_view(name.data(), name.size())) != sans_.end();
    };
    const bool allowed = std::ranges::any_of(request->dns_names(), listed) ||
                         std::ranges::any_of(request->uri_names(), listed);
    *sync_status = allowed
                       ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                      "the client certificate names none of rls.tls.client_san");
    return true;
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest* /*request*/) override {}

 private:
  const std::vector<std::string> sans_;
};

}  // namespace

Status CheckTlsFiles(const config::RlsTlsConfig& tls) {
  auto cert = ReadCertificate("cert_file", tls.cert_file);
  if (!cert.ok()) return cert.status();
  Bio bio(BIO_new_file(tls.key_file.c_str(), "r"));
  if (!bio) return Bad("key_file", tls.key_file, "cannot be read");
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return Bad("key_file", tls.key_file, "holds no unencrypted PEM private key");
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    return Bad("key_file", tls.key_file, "is not the key of " + tls.cert_file);
  }
  if (!tls.client_ca_file.empty()) {
    auto ca = ReadCertificate("client_ca_file", tls.client_ca_file);
    if (!ca.ok()) return ca.status();
  }
  return Status::Ok();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const config::RlsTlsConfig& tls) {
  namespace ex = grpc::experimental;
  auto provider = std::make_shared<ex::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file,
      static_cast<unsigned int>(kTlsRefreshInterval.count()));
  ex::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    if (!tls.client_san.empty()) {
      options.set_certificate_verifier(
          ex::ExternalCertificateVerifier::Create<ClientSanVerifier>(tls.client_san));
    }
  }
  return ex::TlsServerCredentials(options);
}

}  // namespace sluice::rls
