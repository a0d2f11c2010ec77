// Who may call ShouldRateLimit on the gRPC port, when server.auth has callers: the caller is the
// one whose token the `authorization` metadata carries ("Bearer TOKEN"), or, without that
// metadata, the one named by the verified client certificate's DNS or URI names (mutual TLS,
// auth::CallerTable::ByClientSans). It needs the scope `check`, and the request's domain must be
// one of its `domains` when it has a list. Refusals, answered before the call reaches the service
// (so that they count against no limit):
//   UNAUTHENTICATED    no credential, or one that is no caller's (a presented token decides,
//                      whatever the certificate)
//   PERMISSION_DENIED  a caller without the scope `check`, or naming a domain not its own
//   RESOURCE_EXHAUSTED its address has failed to authenticate too often (auth/auth_failures.h)
// Each is counted per reason in sluice_rls_auth_refused_total. A token is never logged nor put in
// an error message.
//
// Thread safety: Check and Exposition may be called concurrently, and with SetCallers, which
// swaps the table atomically (calls in progress keep the one they started with).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>

#include "auth/auth_failures.h"
#include "auth/callers.h"
#include "auth/refusal_counts.h"
#include "base/mutex.h"

namespace sluice::rls {

class CallerCheck {
 public:
  void SetCallers(std::shared_ptr<const auth::CallerTable> callers);

  // OK when the call of `context` may ask about `domain`, else the refusal to answer.
  grpc::Status Check(const grpc::ServerContextBase& context, std::string_view domain);

  std::string Exposition() const;

 private:
  grpc::Status Refuse(auth::AuthRefusal refusal, grpc::StatusCode code, std::string message);

  mutable base::Mutex mu_;
  std::shared_ptr<const auth::CallerTable> callers_ SLUICE_GUARDED_BY(mu_);
  auth::AuthFailures failures_;
  auth::RefusalCounts refused_;
};

// The address of a gRPC peer ("ipv4:10.0.0.7:51234" -> "10.0.0.7", "ipv6:[::1]:5" -> "::1"),
// without the port: what failed authentications are counted by.
std::string_view PeerAddress(std::string_view peer);

}  // namespace sluice::rls
