#include "rls/caller_check.h"

#include <fmt/format.h>
#include <grpc/grpc_security_constants.h>

#include <optional>
#include <string>
#include <vector>

namespace sluice::rls {

using auth::AuthRefusal;

std::string_view PeerAddress(std::string_view peer) {
  for (std::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (!peer.starts_with(scheme)) continue;
    peer.remove_prefix(scheme.size());
    if (const auto colon = peer.rfind(':'); colon != std::string_view::npos) {
      peer = peer.substr(0, colon);
    }
    if (peer.size() >= 2 && peer.front() == '[' && peer.back() == ']') {
      peer = peer.substr(1, peer.size() - 2);
    }
    return peer;
  }
  return peer;  // "unix:..." and the like: the whole
}

void CallerCheck::SetCallers(std::shared_ptr<const auth::CallerTable> callers) {
  base::MutexLock lock(mu_);
  callers_.swap(callers);
}

grpc::Status CallerCheck::Refuse(AuthRefusal refusal, grpc::StatusCode code, std::string message) {
  refused_.Count(refusal);
  return {code, std::move(message)};
}

grpc::Status CallerCheck::Check(const grpc::ServerContextBase& context, std::string_view domain) {
  std::shared_ptr<const auth::CallerTable> callers;
  {
    base::MutexLock lock(mu_);
    callers = callers_;
  }
  if (!callers || !callers->enabled()) return grpc::Status::OK;

  const std::string peer = context.peer();
  const std::string_view address = PeerAddress(peer);
  if (failures_.Throttled(address)) {
    return Refuse(AuthRefusal::kThrottled, grpc::StatusCode::RESOURCE_EXHAUSTED,
                  "too many failed authentications; retry later");
  }
  const auto& metadata = context.client_metadata();
  const auto metadata_authorization = metadata.find("authorization");
  std::optional<std::string_view> authorization;
  if (metadata_authorization != metadata.end()) {
    authorization = std::string_view(metadata_authorization->second.data(),
                                     metadata_authorization->second.size());
  }
  std::vector<std::string> sans;
  bool verified = false;
  if (const auto auth_context = context.auth_context();
      auth_context && auth_context->IsPeerAuthenticated()) {
    verified = true;
    for (const char* property : {GRPC_PEER_DNS_PROPERTY_NAME, GRPC_PEER_URI_PROPERTY_NAME}) {
      for (const grpc::string_ref& name : auth_context->FindPropertyValues(property)) {
        sans.emplace_back(name.data(), name.size());
      }
    }
  }
  const auto authentication = callers->Identify(
      authorization, verified ? std::optional<std::span<const std::string>>(sans) : std::nullopt);
  const auth::Caller* caller = authentication.caller;
  const AuthRefusal refusal = authentication.refusal;
  if (caller == nullptr) {
    failures_.Count(address);
    return Refuse(refusal, grpc::StatusCode::UNAUTHENTICATED,
                  refusal == AuthRefusal::kMissing
                      ? "this service needs the authorization metadata (Bearer <token>) or a "
                        "client certificate of a caller"
                      : "the credential presented is no caller's");
  }
  if (!auth::CallerTable::Allows(*caller, config::kScopeCheck)) {
    return Refuse(AuthRefusal::kScope, grpc::StatusCode::PERMISSION_DENIED,
                  fmt::format("caller '{}' may not ask for decisions (scope check)", caller->name));
  }
  if (!auth::CallerTable::AllowsDomain(*caller, domain)) {
    return Refuse(AuthRefusal::kRule, grpc::StatusCode::PERMISSION_DENIED,
                  fmt::format("caller '{}' may not use this domain", caller->name));
  }
  return grpc::Status::OK;
}

std::string CallerCheck::Exposition() const {
  return refused_.Exposition("sluice_rls_auth_refused_total",
                             "gRPC rate limit calls refused before any decision, by reason.");
}

}  // namespace sluice::rls
