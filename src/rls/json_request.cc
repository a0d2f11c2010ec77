#include "rls/json_request.h"

#include <google/protobuf/type.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <memory>
#include <string>

namespace sluice::rls {
namespace {

namespace protobuf = google::protobuf;

constexpr std::string_view kTypeUrlPrefix = "type.googleapis.com";

std::string TypeUrlOf(const protobuf::Descriptor& descriptor) {
  return std::string(kTypeUrlPrefix) + "/" + descriptor.full_name();
}

// The generated types as protobuf's JSON mapping sees them, but for the descriptor entries'
// bytes fields, seen as the strings Envoy declares.
class EntriesAsStrings final : public protobuf::util::TypeResolver {
 public:
  EntriesAsStrings()
      : generated_(protobuf::util::NewTypeResolverForDescriptorPool(
            std::string(kTypeUrlPrefix), protobuf::DescriptorPool::generated_pool())),
        entry_url_(TypeUrlOf(
            *envoy::extensions::common::ratelimit::v3::RateLimitDescriptor::Entry::descriptor())) {}

  protobuf::util::Status ResolveMessageType(const std::string& type_url,
                                            protobuf::Type* type) override {
    protobuf::util::Status status = generated_->ResolveMessageType(type_url, type);
    if (status.ok() && type_url == entry_url_) {
      for (protobuf::Field& field : *type->mutable_fields()) {
        if (field.kind() == protobuf::Field::TYPE_BYTES)
          field.set_kind(protobuf::Field::TYPE_STRING);
      }
    }
    return status;
  }

  protobuf::util::Status ResolveEnumType(const std::string& type_url,
                                         protobuf::Enum* type) override {
    return generated_->ResolveEnumType(type_url, type);
  }

 private:
  const std::unique_ptr<protobuf::util::TypeResolver> generated_;
  const std::string entry_url_;
};

}  // namespace

Status ParseRateLimitRequestJson(std::string_view json,
                                 envoy::service::ratelimit::v3::RateLimitRequest& request) {
  // Stateless past construction: the generated pool's resolver only reads that pool.
  static EntriesAsStrings resolver;
  static const std::string request_url = TypeUrlOf(*request.GetDescriptor());
  std::string binary;
  const protobuf::util::Status parsed = protobuf::util::JsonToBinaryString(
      &resolver, request_url, protobuf::StringPiece(json.data(), json.size()), &binary);
  if (!parsed.ok()) {
    return Status::InvalidArgument("not a RateLimitRequest: " + parsed.message().as_string());
  }
  if (!request.ParseFromString(binary)) {
    return Status::InvalidArgument("not a RateLimitRequest: its fields do not decode");
  }
  return Status::Ok();
}

}  // namespace sluice::rls
