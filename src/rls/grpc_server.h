// The rate limit service on gRPC: envoy.service.ratelimit.v3.RateLimitService answered by a
// Service (rls/service.h) through gRPC's callback API, so a call waiting on the store holds no
// thread, beside the standard grpc.health.v1.Health (SERVING while up) and server reflection
// (grpc.reflection.v1alpha, what grpcurl-style tools use). Plaintext, or TLS and mutual TLS
// (rls/server_tls.h); with callers, each call is authorized first (rls/caller_check.h).
//
// Thread safety: Start, then Shutdown, from one thread; calls are served on gRPC's threads.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <optional>
#include <string>

#include "auth/callers.h"
#include "config/config.h"
#include "rls/caller_check.h"
#include "rls/server_tls.h"
#include "rls/service.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::rls {

// A sluice error as the gRPC status answered for it.
grpc::Status ToGrpcStatus(const Status& status);

class GrpcServer {
 public:
  // `service` must outlive the server.
  explicit GrpcServer(rls::Service& service);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Listens on `address` ("127.0.0.1:8081", port 0 for a free one) and serves, over TLS with
  // `tls`. UNAVAILABLE when the address cannot be bound; INVALID_ARGUMENT when the TLS files do
  // not hold a certificate and its key (rls/server_tls.h). Set the callers first.
  Status Start(const std::string& address,
               const std::optional<config::RlsTlsConfig>& tls = std::nullopt);
  // Reads the TLS files again now (SIGHUP); a failure is returned and logged, and the certificate
  // served stays. OK without TLS.
  Status ReloadTls() { return tls_ ? tls_->Reload() : Status::Ok(); }
  // Who may call (auth/callers.h); swapped atomically. Unset or not enabled: anyone.
  void SetCallers(std::shared_ptr<const auth::CallerTable> callers) {
    callers_.SetCallers(std::move(callers));
  }
  // The /metrics lines of the calls refused by caller.
  std::string AuthExposition() const { return callers_.Exposition(); }
  // The port bound by Start.
  int port() const { return port_; }
  // Stops taking calls and waits up to `grace` for those in flight, then cancels the rest.
  void Shutdown(Duration grace);

 private:
  class Handler;
  CallerCheck callers_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<ServerTls> tls_;  // outlives server_, which reads its file
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace sluice::rls
