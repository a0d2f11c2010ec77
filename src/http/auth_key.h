// The key of a forward-auth check (GET /v1/auth/{rule}): what the rule's `key` names, read from
// the headers a reverse proxy sends with its auth subrequest (config::KeyPart), with the
// middleware's extractors (sluice/middleware/middleware.h): the client address by ClientIp's walk
// of X-Forwarded-For, or from X-Real-IP, keyed under the ClientPrefixes (IPv4 /32, IPv6 /64 by
// default); a header; the original method; the original path in its canonical form (NormalPath,
// the middleware's Path()). Several parts are joined as Compose joins them, and a long key is
// hashed as the middleware hashes it (StoredKey).
//
// Unlike the middleware, a request with nothing to key on has no key: a part missing (an
// X-Forwarded-For with no entry is missing), or a client address from a peer that is not a
// trusted proxy (whose headers anyone could have written), is refused with 401 rather than
// counted under a shared key; an original path that is no path (a '%' not followed by two hex
// digits) with 400.
//
// Thread safety: immutable once built; Of may be called concurrently.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"
#include "sluice/middleware/middleware.h"

namespace sluice::http {

class AuthKey {
 public:
  // `auth.key` must not be empty.
  explicit AuthKey(const config::ForwardAuth& auth);

  // Why a request has no key, and the status it is refused with: 401 for a part missing or not
  // believed, 400 for a malformed one, 500 if libcrypto could not hash a long key.
  struct NoKey {
    int status;
    std::string reason;
  };

  // The key of `request`, or why it has none.
  std::variant<std::string, NoKey> Of(const middleware::RequestView& request) const;

 private:
  struct Part {
    std::string what;  // where it is read from, for the error
    middleware::KeyExtractor extract;
    // When `extract` found nothing: why what it read is malformed, or nullopt if it is missing.
    std::function<std::optional<std::string>(const middleware::RequestView&)> malformed = nullptr;
  };

  static std::variant<std::string, NoKey> Stored(std::string key);

  std::vector<Part> parts_;
  middleware::KeyExtractor composed_;  // of two parts or more
  bool needs_trusted_peer_ = false;
  middleware::TrustedProxies trusted_;
};

}  // namespace sluice::http
