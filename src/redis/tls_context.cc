#include "redis/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace sluice::redis {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's reason for the last error, without the file's content.
std::string OpenSslReason(const boost::system::error_code& ec) {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code != 0) {
    if (const char* reason = ERR_reason_error_string(code)) return reason;
  }
  return ec.message();
}

Status BadFile(std::string_view what, const std::string& path, const std::string& why) {
  return Status::InvalidArgument("cannot use " + std::string(what) + " '" + path + "': " + why);
}

// A readable file, or the error naming it (OpenSSL's reasons for a missing file are obscure).
Status Readable(std::string_view what, const std::string& path) {
  std::ifstream file(path);
  if (!file) return BadFile(what, path, std::strerror(errno));
  return Status::Ok();
}

Result<std::shared_ptr<ssl::context>> Build(const RedisTlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return Status::InvalidArgument(
        "a client certificate needs both cert_file and key_file (or neither)");
  }
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  boost::system::error_code ec;
  if (options.insecure_skip_verify) {
    context->set_verify_mode(ssl::verify_none);
  } else {
    context->set_verify_mode(ssl::verify_peer);
    if (options.ca_file.empty()) {
      if (context->set_default_verify_paths(ec); ec) {
        return Status::InvalidArgument("cannot use the system's certificate authorities: " +
                                       OpenSslReason(ec));
      }
    } else {
      if (Status s = Readable("ca_file", options.ca_file); !s.ok()) return s;
      if (context->load_verify_file(options.ca_file, ec); ec) {
        return BadFile("ca_file", options.ca_file, OpenSslReason(ec));
      }
    }
  }
  if (!options.cert_file.empty()) {
    if (Status s = Readable("cert_file", options.cert_file); !s.ok()) return s;
    if (Status s = Readable("key_file", options.key_file); !s.ok()) return s;
    if (context->use_certificate_chain_file(options.cert_file, ec); ec) {
      return BadFile("cert_file", options.cert_file, OpenSslReason(ec));
    }
    // Also checks that it is the certificate's key ("key values mismatch").
    if (context->use_private_key_file(options.key_file, ssl::context::pem, ec); ec) {
      return BadFile("key_file", options.key_file, OpenSslReason(ec));
    }
  }
  return context;
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const RedisTlsOptions& options) {
  std::shared_ptr<TlsContext> tls(new TlsContext());
  if (Status s = tls->Reload(options); !s.ok()) return s;
  return tls;
}

Status TlsContext::Reload(const RedisTlsOptions& options) {
  auto context = Build(options);
  if (!context.ok()) return context.status();
  base::MutexLock lock(mu_);
  context_ = std::move(*context);
  verify_ = !options.insecure_skip_verify;
  return Status::Ok();
}

std::shared_ptr<boost::asio::ssl::context> TlsContext::Current() const {
  base::MutexLock lock(mu_);
  return context_;
}

bool TlsContext::verify() const {
  base::MutexLock lock(mu_);
  return verify_;
}

}  // namespace sluice::redis
