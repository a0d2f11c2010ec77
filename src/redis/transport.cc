#include "redis/transport.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace sluice::redis {

void Transport::Reset(const TlsContext* tls, const std::string& server_name) {
  tls_.reset();
  socket_ = Socket(io_);
  if (tls == nullptr) return;
  context_ = tls->Current();
  verify_ = tls->verify();
  server_name_ = server_name;
  tls_.emplace(socket_, *context_);
  SSL* ssl = tls_->native_handle();
  boost::system::error_code not_ip;
  const bool ip = (boost::asio::ip::make_address(server_name, not_ip), !not_ip);
  // SNI carries host names only (RFC 6066); an IP address is checked against the certificate's.
  if (!ip) SSL_set_tlsext_host_name(ssl, server_name.c_str());
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, server_name.c_str(), server_name.size());
  }
}

void Transport::Close() {
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void Transport::Shutdown() {
  boost::system::error_code ignored;
  socket_.shutdown(Socket::shutdown_both, ignored);
}

std::string Transport::Reason(const boost::system::error_code& ec) {
  if (ec == boost::asio::ssl::error::stream_truncated) return "TLS: the server closed the stream";
  if (ec.category() == boost::asio::error::get_ssl_category()) return "TLS: " + ec.message();
  return ec.message();
}

bool Transport::IsAlert(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category() &&
         ec != boost::asio::ssl::error::stream_truncated;
}

std::string Transport::HandshakeError(const boost::system::error_code& ec) {
  if (tls_ && verify_) {
    const long result = SSL_get_verify_result(tls_->native_handle());
    if (result != X509_V_OK) {
      return "TLS handshake failed: the server's certificate was refused: " +
             std::string(X509_verify_cert_error_string(result)) + " (verifying the name '" +
             server_name_ + "')";
    }
  }
  return "TLS handshake failed: " + Reason(ec);
}

}  // namespace sluice::redis
