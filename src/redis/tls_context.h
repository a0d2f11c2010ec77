// TlsContext: the OpenSSL context that new connections to Redis over TLS are made with, built
// from RedisTlsOptions' files (TLS 1.2 at least; the server verified unless
// insecure_skip_verify), and built again from files on Reload. A connection takes the current
// context when it connects and keeps it: a reload changes only the connections made after it.
//
// Thread safety: Current and Reload may be called from any thread.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "base/mutex.h"
#include "sluice/redis_tls.h"
#include "sluice/status.h"

namespace sluice::redis {

class TlsContext {
 public:
  // Errors name the file and what is wrong with it, never its content.
  static Result<std::shared_ptr<TlsContext>> Create(const RedisTlsOptions& options);

  // The files read again (or other files); on an error the current context stays.
  Status Reload(const RedisTlsOptions& options);

  std::shared_ptr<boost::asio::ssl::context> Current() const;
  bool verify() const;

 private:
  TlsContext() = default;

  mutable base::Mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> context_ SLUICE_GUARDED_BY(mu_);
  bool verify_ SLUICE_GUARDED_BY(mu_) = true;
};

}  // namespace sluice::redis
