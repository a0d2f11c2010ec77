// The key of a forward-auth check (GET /v1/auth/{rule}): what the rule's `key` names, read from
// the headers a reverse proxy sends with its auth subrequest (config::KeyPart), with the
// middleware's extractors (sluice/middleware/middleware.h): the client address by ClientIp's walk
// of X-Forwarded-For, or from X-Real-IP, keyed under the ClientPrefixes (IPv4 /32, IPv6 /64 by
// default); a header; the original method or path. Several parts are joined as Compose joins
// them, and a long key is hashed as the middleware hashes it (StoredKey).
//
// Unlike the middleware, a request with nothing to key on has no key: a part missing, or a client
// address from a peer that is not a trusted proxy (whose headers anyone could have written), is
// an error saying so, and the check is refused rather than counted under a shared key.
//
// Thread safety: immutable once built; Of may be called concurrently.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "sluice/middleware/middleware.h"
#include "sluice/status.h"

namespace sluice::http {

class AuthKey {
 public:
  // `auth.key` must not be empty.
  explicit AuthKey(const config::ForwardAuth& auth);

  // The key of `request`, or INVALID_ARGUMENT saying what it lacks.
  Result<std::string> Of(const middleware::RequestView& request) const;

 private:
  struct Part {
    std::string what;  // where it is read from, for the error
    middleware::KeyExtractor extract;
  };

  std::vector<Part> parts_;
  middleware::KeyExtractor composed_;  // of two parts or more
  bool needs_trusted_peer_ = false;
  middleware::TrustedProxies trusted_;
};

}  // namespace sluice::http
