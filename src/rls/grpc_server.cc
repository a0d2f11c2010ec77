#include "rls/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <functional>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace sluice::rls {

grpc::Status ToGrpcStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
    case StatusCode::kCostExceedsLimit:
      return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case StatusCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, status.message()};
    case StatusCode::kUnavailable:
      return {grpc::StatusCode::UNAVAILABLE, status.message()};
    case StatusCode::kDeadlineExceeded:
      return {grpc::StatusCode::DEADLINE_EXCEEDED, status.message()};
    case StatusCode::kInternal:
      break;
  }
  return {grpc::StatusCode::INTERNAL, status.message()};
}

class GrpcServer::Handler final : public pb::RateLimitService::CallbackService {
 public:
  Handler(rls::Service& service, CallerCheck& callers) : service_(service), callers_(callers) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const pb::RateLimitRequest* request,
                                            pb::RateLimitResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (grpc::Status allowed = callers_.Check(*context, request->domain()); !allowed.ok()) {
      reactor->Finish(allowed);
      return reactor;
    }
    // The peer ("ipv4:10.0.0.7:51234"): one Envoy's connection, whose calls share one share.
    service_.ShouldRateLimit(
        *request, *response, [reactor](Status status) { reactor->Finish(ToGrpcStatus(status)); },
        std::hash<std::string>{}(context->peer()));
    return reactor;
  }

 private:
  rls::Service& service_;
  CallerCheck& callers_;
};

GrpcServer::GrpcServer(rls::Service& service)
    : handler_(std::make_unique<Handler>(service, callers_)) {}

GrpcServer::~GrpcServer() { Shutdown(Duration(0)); }

Status GrpcServer::Start(const std::string& address,
                         const std::optional<config::RlsTlsConfig>& tls) {
  if (tls) {
    auto loaded = ServerTls::Load(*tls);
    if (!loaded.ok()) return loaded.status();
    tls_ = std::move(loaded).value();
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, tls_ ? tls_->Credentials() : grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterService(handler_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return Status::Unavailable("rls: cannot listen for gRPC on " + address);
  }
  return Status::Ok();
}

void GrpcServer::Shutdown(Duration grace) {
  if (server_ == nullptr) return;
  if (auto* health = server_->GetHealthCheckService()) health->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace sluice::rls
