// Who may call the decision service: the callers of the config's server.auth, each known by the
// SHA-256 of its token or by the names of its client certificate (or both: either credential
// identifies it), and what each may do (its scopes, and the rules and RLS domains it may spend).
// No front end here: the HTTP routing (http/api.h) and the gRPC rate limit service
// (rls/grpc_server.h) find the credential (an Authorization header, the `authorization` metadata,
// a verified client certificate's names) and ask.
//
// Authenticate hashes the presented token once with SHA-256 and compares the digest with every
// caller's, each in constant time (CRYPTO_memcmp) and without stopping at a match, so that the
// time taken tells nothing of which digest or how much of it matched. The token is never kept.
//
// Thread safety: a CallerTable is immutable once built; share it as a
// shared_ptr<const CallerTable> and swap the pointer to reload.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace sluice::auth {

// Why a request was refused before it reached a handler.
enum class AuthRefusal {
  kMissing,    // no Authorization: Bearer token (401)
  kUnknown,    // a token that is no caller's (401)
  kScope,      // a caller outside its scopes (403)
  kRule,       // a caller naming a rule or RLS domain it may not use (403)
  kThrottled,  // too many failed authentications from its address (429)
};
inline constexpr int kAuthRefusalCount = 5;
std::string_view AuthRefusalName(AuthRefusal refusal);  // "missing", "unknown", ...

struct Caller {
  std::string name;
  uint8_t scopes = 0;  // config::Scope bits
  std::optional<std::vector<std::string>> rules;
  std::optional<std::vector<std::string>> domains;
};

class CallerTable {
 public:
  // Empty (enabled() false) when `auth` is not enabled: every request is admitted.
  static std::shared_ptr<const CallerTable> Build(const config::AuthConfig& auth);

  bool enabled() const { return enabled_; }

  // The caller whose token an Authorization header value carries ("Bearer TOKEN", the scheme
  // case-insensitive), or why none: kMissing without a header or a Bearer token, kUnknown for a
  // token no caller has.
  struct Authentication {
    const Caller* caller = nullptr;
    AuthRefusal refusal = AuthRefusal::kMissing;  // when caller is null
  };
  Authentication Authenticate(std::optional<std::string_view> authorization) const;

  // The caller whose client_san holds one of `sans`, the DNS and URI subject alternative names of
  // a client certificate the TLS handshake has verified; null when none does, or when the names
  // belong to two callers (an ambiguous certificate identifies no one). For every front end
  // serving mutual TLS.
  const Caller* ByClientSans(std::span<const std::string> sans) const;

  // Who a request comes from, for every front end: its token (an Authorization header, gRPC's
  // `authorization` metadata) when it presents one, whatever its certificate; else the client
  // certificate's DNS and URI names `sans` when the handshake verified one (ByClientSans); else
  // no one (kMissing).
  Authentication Identify(std::optional<std::string_view> authorization,
                          std::optional<std::span<const std::string>> sans) const;

  static bool Allows(const Caller& caller, config::Scope scope) {
    return (caller.scopes & scope) != 0;
  }
  static bool AllowsRule(const Caller& caller, std::string_view rule);
  static bool AllowsDomain(const Caller& caller, std::string_view domain);

 private:
  struct Entry {
    std::optional<std::array<uint8_t, 32>> token_sha256;
    std::vector<std::string> client_san;
    Caller caller;
  };
  bool enabled_ = false;
  std::vector<Entry> entries_;
};

}  // namespace sluice::auth
