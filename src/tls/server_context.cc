#include "tls/server_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/system/error_code.hpp>
#include <fstream>
#include <string_view>

namespace sluice::tls {
namespace {

namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> Fail(ContextError& error, std::string_view field,
                                   const std::string& file, std::string_view why) {
  error.field = field;
  error.message = "cannot use '" + file + "': " + std::string(why);
  return nullptr;
}

// OpenSSL's reasons read "no start line (PEM routines)"; a missing file is told plainly.
std::string Why(const std::string& file, const boost::system::error_code& ec) {
  if (!std::ifstream(file).is_open()) return "cannot open it";
  return ec.message();
}

}  // namespace

std::shared_ptr<ssl::context> LoadServerContext(const ServerFiles& files, ContextError& error) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(
      native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
  // An encrypted key fails to load instead of OpenSSL asking for its passphrase on the terminal.
  context->set_password_callback(
      [](std::size_t, ssl::context::password_purpose) { return std::string(); });

  boost::system::error_code ec;
  context->use_certificate_chain_file(files.cert_file, ec);
  if (ec) return Fail(error, "cert_file", files.cert_file, Why(files.cert_file, ec));
  context->use_private_key_file(files.key_file, ssl::context::pem, ec);
  if (ec) {
    const std::string why =
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH
            ? "it is not the key of cert_file '" + files.cert_file + "'"
            : Why(files.key_file, ec);
    return Fail(error, "key_file", files.key_file, why);
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return Fail(error, "key_file", files.key_file,
                "it is not the key of cert_file '" + files.cert_file + "'");
  }
  if (!files.client_ca_file.empty()) {
    context->load_verify_file(files.client_ca_file, ec);
    if (ec) {
      return Fail(error, "client_ca_file", files.client_ca_file, Why(files.client_ca_file, ec));
    }
    // Tells clients which authorities their certificate must come from.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str());
    if (names == nullptr) {
      return Fail(error, "client_ca_file", files.client_ca_file, "it holds no certificate");
    }
    SSL_CTX_set_client_CA_list(native, names);
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

}  // namespace sluice::tls
