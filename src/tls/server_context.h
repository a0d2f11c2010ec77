// The TLS context of a server port, built from its files (tls/server_files.h): the certificate
// chain and the key, checked to belong together; TLS 1.2 at least, no renegotiation, the server's
// cipher preference among OpenSSL's defaults; with a client authority, every client must present
// a certificate it signed (mTLS). A pure function of the files' contents; thread-safe.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "sluice/status.h"
#include "tls/server_files.h"

namespace sluice::tls {

// What a context failed on: the field of ServerFiles ("cert_file", "key_file", "client_ca_file")
// and why, naming the file but none of its contents.
struct ContextError {
  std::string field;
  std::string message;
};

// The context, or null and `error` set.
std::shared_ptr<boost::asio::ssl::context> LoadServerContext(const ServerFiles& files,
                                                             ContextError& error);

}  // namespace sluice::tls
