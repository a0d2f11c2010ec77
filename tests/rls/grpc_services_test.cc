// What Debian 12's gRPC gives the coming RLS server, checked on a loopback port: the generated
// RateLimitService answers at the method path Envoy calls, the built-in grpc.health.v1.Health
// service (grpc::EnableDefaultHealthCheckService) answers Check, and libgrpc++_reflection's
// grpc.reflection.v1alpha service lists and describes the services (what grpcurl uses). The
// reflection client's types come from Debian's grpc-proto as a descriptor set, loaded at run time
// into a pool of its own, so they cannot clash with the copy compiled into libgrpc++_reflection.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace sluice::rls {
namespace {

namespace service = envoy::service::ratelimit::v3;
namespace health = grpc::health::v1;
namespace pb = google::protobuf;

constexpr auto kDeadline = std::chrono::seconds(10);

// Answers every request OVER_LIMIT with the request's domain as the body, so a test can tell it
// reached this code.
class FixedAnswer final : public service::RateLimitService::Service {
  grpc::Status ShouldRateLimit(grpc::ServerContext*, const service::RateLimitRequest* request,
                               service::RateLimitResponse* response) override {
    response->set_overall_code(service::RateLimitResponse::OVER_LIMIT);
    response->set_raw_body(request->domain());
    return grpc::Status::OK;
  }
};

class RlsGrpcServices : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + kDeadline);
  }

  static void SetDeadline(grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  }

  // One message each way on a bidirectional stream, as raw bytes.
  std::string Exchange(const std::string& method, const std::string& request) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::CompletionQueue queue;
    const auto step = [&](int tag) {
      void* got = nullptr;
      bool ok = false;
      EXPECT_TRUE(queue.Next(&got, &ok));
      EXPECT_EQ(got, reinterpret_cast<void*>(static_cast<intptr_t>(tag)));
      return ok;
    };
    const auto tag = [](int n) { return reinterpret_cast<void*>(static_cast<intptr_t>(n)); };
    auto call = stub.PrepareCall(&context, method, &queue);
    call->StartCall(tag(1));
    EXPECT_TRUE(step(1));
    grpc::Slice slice(request);
    grpc::ByteBuffer out(&slice, 1);
    call->Write(out, tag(2));
    EXPECT_TRUE(step(2));
    call->WritesDone(tag(3));
    EXPECT_TRUE(step(3));
    grpc::ByteBuffer in;
    call->Read(&in, tag(4));
    const bool read = step(4);
    grpc::Status status;
    call->Finish(&status, tag(5));
    EXPECT_TRUE(step(5));
    EXPECT_TRUE(status.ok()) << status.error_message();
    queue.Shutdown();
    void* ignored = nullptr;
    bool ignored_ok = false;
    while (queue.Next(&ignored, &ignored_ok)) {
    }
    std::string bytes;
    if (read) {
      std::vector<grpc::Slice> slices;
      EXPECT_TRUE(in.Dump(&slices).ok());
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    return bytes;
  }

  FixedAnswer service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(RlsGrpcServices, GeneratedStubReachesTheService) {
  auto stub = service::RateLimitService::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(context);
  service::RateLimitRequest request;
  request.set_domain("envoy");
  service::RateLimitResponse response;
  const grpc::Status status = stub->ShouldRateLimit(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.overall_code(), service::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(response.raw_body(), "envoy");
}

TEST_F(RlsGrpcServices, EnvoysMethodPathAndBytes) {
  // The path and request bytes Envoy sends, written by hand: domain = 1, "edge".
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::CompletionQueue queue;
  const std::string request_bytes = std::string("\x0a\x04", 2) + "edge";
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  auto call = stub.PrepareUnaryCall(
      &context, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", request, &queue);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* got = nullptr;
  bool ok = false;
  ASSERT_TRUE(queue.Next(&got, &ok));
  ASSERT_TRUE(ok);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // overall_code = 1: OVER_LIMIT (2); raw_body = 5: "edge".
  EXPECT_EQ(bytes, std::string("\x08\x02\x2a\x04", 4) + "edge");
  queue.Shutdown();
  while (queue.Next(&got, &ok)) {
  }
}

TEST_F(RlsGrpcServices, DefaultHealthService) {
  auto stub = health::Health::NewStub(channel_);
  const auto check = [&](const std::string& name) {
    grpc::ClientContext context;
    SetDeadline(context);
    health::HealthCheckRequest request;
    request.set_service(name);
    health::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    EXPECT_TRUE(status.ok()) << name << ": " << status.error_message();
    return response.status();
  };
  EXPECT_EQ(check(""), health::HealthCheckResponse::SERVING);
  // Named services are known once the server sets their status.
  grpc::HealthCheckServiceInterface* service = server_->GetHealthCheckService();
  ASSERT_NE(service, nullptr);
  service->SetServingStatus(service::RateLimitService::service_full_name(), false);
  EXPECT_EQ(check(service::RateLimitService::service_full_name()),
            health::HealthCheckResponse::NOT_SERVING);
  service->SetServingStatus(false);
  EXPECT_EQ(check(""), health::HealthCheckResponse::NOT_SERVING);
}

TEST_F(RlsGrpcServices, ServerReflection) {
  pb::FileDescriptorSet set;
  std::ifstream in(SLUICE_REFLECTION_DESCRIPTORS, std::ios::binary);
  ASSERT_TRUE(set.ParseFromIstream(&in)) << SLUICE_REFLECTION_DESCRIPTORS;
  pb::DescriptorPool pool;
  for (const pb::FileDescriptorProto& file : set.file()) ASSERT_NE(pool.BuildFile(file), nullptr);
  const pb::Descriptor* request_type =
      pool.FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
  const pb::Descriptor* response_type =
      pool.FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
  ASSERT_NE(request_type, nullptr);
  ASSERT_NE(response_type, nullptr);
  pb::DynamicMessageFactory factory(&pool);
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

  const auto ask = [&](const std::string& field, const std::string& value) {
    std::unique_ptr<pb::Message> request(factory.GetPrototype(request_type)->New());
    request->GetReflection()->SetString(request.get(), request_type->FindFieldByName(field), value);
    std::unique_ptr<pb::Message> response(factory.GetPrototype(response_type)->New());
    EXPECT_TRUE(response->ParseFromString(Exchange(method, request->SerializeAsString())));
    return response;
  };

  // list_services: the RLS, health and reflection itself.
  auto listed = ask("list_services", "");
  const pb::Message& list = listed->GetReflection()->GetMessage(
      *listed, response_type->FindFieldByName("list_services_response"));
  const pb::FieldDescriptor* services = list.GetDescriptor()->FindFieldByName("service");
  std::set<std::string> names;
  for (int i = 0; i < list.GetReflection()->FieldSize(list, services); ++i) {
    const pb::Message& entry = list.GetReflection()->GetRepeatedMessage(list, services, i);
    names.insert(
        entry.GetReflection()->GetString(entry, entry.GetDescriptor()->FindFieldByName("name")));
  }
  EXPECT_TRUE(names.count("envoy.service.ratelimit.v3.RateLimitService")) << names.size();
  EXPECT_TRUE(names.count("grpc.health.v1.Health"));
  EXPECT_TRUE(names.count("grpc.reflection.v1alpha.ServerReflection"));

  // file_containing_symbol: the file of RateLimitService, and the files it imports.
  auto described = ask("file_containing_symbol", "envoy.service.ratelimit.v3.RateLimitService");
  const pb::Message& files = described->GetReflection()->GetMessage(
      *described, response_type->FindFieldByName("file_descriptor_response"));
  const pb::FieldDescriptor* protos =
      files.GetDescriptor()->FindFieldByName("file_descriptor_proto");
  std::set<std::string> file_names;
  for (int i = 0; i < files.GetReflection()->FieldSize(files, protos); ++i) {
    pb::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(files.GetReflection()->GetRepeatedString(files, protos, i)));
    file_names.insert(file.name());
  }
  EXPECT_TRUE(file_names.count("envoy/service/ratelimit/v3/rls.proto"));
  EXPECT_TRUE(file_names.count("envoy/extensions/common/ratelimit/v3/ratelimit.proto"));
}

}  // namespace
}  // namespace sluice::rls
