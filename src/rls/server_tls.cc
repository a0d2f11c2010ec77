#include "rls/server_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rls {
namespace {

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

Result<std::unique_ptr<ServerTls>> ServerTls::Load(const config::RlsTlsConfig& tls) {
  auto identity = tls::PemFile::Create(tls::PemFile::Part::kIdentity);
  if (!identity.ok()) return identity.status();
  std::unique_ptr<tls::PemFile> authorities;
  if (!tls.client_ca_file.empty()) {
    auto created = tls::PemFile::Create(tls::PemFile::Part::kAuthorities);
    if (!created.ok()) return created.status();
    authorities = std::move(created).value();
  }
  std::unique_ptr<ServerTls> server(
      new ServerTls(tls, std::move(identity).value(), std::move(authorities)));
  auto files = tls::RotatingContext::Load(
      tls::ServerFiles{.cert_file = tls.cert_file,
                       .key_file = tls.key_file,
                       .client_ca_file = tls.client_ca_file},
      [identity = server->identity_.get(),
       authorities = server->authorities_.get()](boost::asio::ssl::context& context) {
        if (authorities == nullptr) return tls::PemFile::Write(context.native_handle(), {identity});
        return tls::PemFile::Write(context.native_handle(), {identity, authorities});
      });
  if (!files.ok()) {
    if (files.status().code() != StatusCode::kInvalidArgument) return files.status();
    return Status::InvalidArgument("rls.tls." + files.status().message());  // names the field
  }
  server->files_ = std::move(files).value();
  server->files_->WatchFiles(kTlsRefreshInterval);
  return server;
}

ServerTls::~ServerTls() = default;

Status ServerTls::Reload() { return files_->Reload(); }

std::shared_ptr<grpc::ServerCredentials> ServerTls::Credentials() const {
  namespace ex = grpc::experimental;
  auto provider = std::make_shared<ex::FileWatcherCertificateProvider>(
      identity_->path(), identity_->path(), authorities_ ? authorities_->path() : std::string(),
      static_cast<unsigned int>(kTlsRefreshInterval.count()));
  ex::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!authorities_) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    if (!config_.client_san.empty()) {
      options.set_certificate_verifier(
          ex::ExternalCertificateVerifier::Create<ClientSanVerifier>(config_.client_san));
    }
  }
  return ex::TlsServerCredentials(options);
}

}  // namespace sluice::rls
