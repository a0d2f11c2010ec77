// The generated RLS messages against the bytes Envoy's definitions imply: each expected byte string
// is written by hand from Envoy's field numbers and wire types (tag = number << 3 | type), so a
// wrong number, type or nesting in proto/ fails here. Parsing the same bytes must give the fields
// back with nothing left over as unknown.
#include <gtest/gtest.h>

#include <string>

#include "envoy/config/core/v3/base.pb.h"
#include "envoy/extensions/common/ratelimit/v3/ratelimit.pb.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls/unit.h"

namespace sluice::rls {
namespace {

namespace core = envoy::config::core::v3;
namespace common = envoy::extensions::common::ratelimit::v3;
namespace service = envoy::service::ratelimit::v3;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out += static_cast<char>(b);
  return out;
}

std::string Serialize(const google::protobuf::Message& message) {
  std::string out;
  EXPECT_TRUE(message.SerializeToString(&out));
  return out;
}

// Wire types: 0 varint, 2 length-delimited.
constexpr int Tag(int number, int wire_type) { return number << 3 | wire_type; }
constexpr int kVarint = 0;
constexpr int kLen = 2;

TEST(RlsProtoWire, RateLimitRequest) {
  service::RateLimitRequest request;
  request.set_domain("d");
  common::RateLimitDescriptor* descriptor = request.add_descriptors();
  common::RateLimitDescriptor::Entry* entry = descriptor->add_entries();
  entry->set_key("k");
  entry->set_value("v");
  descriptor->mutable_limit()->set_requests_per_unit(5);
  descriptor->mutable_limit()->set_unit(envoy::type::v3::MINUTE);
  descriptor->mutable_hits_addend()->set_value(7);
  descriptor->set_is_negative_hits(true);
  request.set_hits_addend(3);

  // clang-format off
  const std::string expected = Bytes({
      Tag(1, kLen), 1, 'd',                         // domain = 1
      Tag(2, kLen), 20,                             // descriptors = 2
           Tag(1, kLen), 6,                         //   entries = 1
               Tag(1, kLen), 1, 'k',                //     key = 1
               Tag(2, kLen), 1, 'v',                //     value = 2
           Tag(2, kLen), 4,                         //   limit = 2
               Tag(1, kVarint), 5,                  //     requests_per_unit = 1
               Tag(2, kVarint), 2,                  //     unit = 2 (MINUTE = 2)
           Tag(3, kLen), 2, Tag(1, kVarint), 7,     //   hits_addend = 3 (UInt64Value.value = 1)
           Tag(4, kVarint), 1,                      //   is_negative_hits = 4
      Tag(3, kVarint), 3,                           // hits_addend = 3
  });
  // clang-format on
  EXPECT_EQ(Serialize(request), expected);

  service::RateLimitRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(expected));
  EXPECT_EQ(parsed.domain(), "d");
  ASSERT_EQ(parsed.descriptors_size(), 1);
  EXPECT_EQ(parsed.descriptors(0).entries(0).key(), "k");
  EXPECT_EQ(parsed.descriptors(0).entries(0).value(), "v");
  EXPECT_EQ(parsed.descriptors(0).limit().requests_per_unit(), 5u);
  EXPECT_EQ(parsed.descriptors(0).limit().unit(), envoy::type::v3::MINUTE);
  EXPECT_TRUE(parsed.descriptors(0).has_hits_addend());
  EXPECT_EQ(parsed.descriptors(0).hits_addend().value(), 7u);
  EXPECT_TRUE(parsed.descriptors(0).is_negative_hits());
  EXPECT_EQ(parsed.hits_addend(), 3u);
  EXPECT_TRUE(parsed.GetReflection()->GetUnknownFields(parsed).empty());
}

// Envoy sends a header's bytes as they come, in fields it declares string: entries that are not
// UTF-8 parse (sluice declares them bytes, encoded the same way), with their bytes unchanged.
TEST(RlsProtoWire, EntriesThatAreNotUtf8Parse) {
  // clang-format off
  const std::string wire = Bytes({
      Tag(1, kLen), 1, 'd',                         // domain = 1
      Tag(2, kLen), 9,                              // descriptors = 2
           Tag(1, kLen), 7,                         //   entries = 1
               Tag(1, kLen), 1, 0xfe,               //     key = 1
               Tag(2, kLen), 2, 0xff, 0xc3,         //     value = 2
  });
  // clang-format on
  service::RateLimitRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  ASSERT_EQ(parsed.descriptors_size(), 1);
  EXPECT_EQ(parsed.descriptors(0).entries(0).key(), Bytes({0xfe}));
  EXPECT_EQ(parsed.descriptors(0).entries(0).value(), Bytes({0xff, 0xc3}));
  EXPECT_EQ(Serialize(parsed), wire);
}

TEST(RlsProtoWire, RateLimitResponse) {
  service::RateLimitResponse response;
  response.set_overall_code(service::RateLimitResponse::OVER_LIMIT);
  service::RateLimitResponse::DescriptorStatus* status = response.add_statuses();
  status->set_code(service::RateLimitResponse::OVER_LIMIT);
  status->mutable_current_limit()->set_name("n");
  status->mutable_current_limit()->set_requests_per_unit(10);
  status->mutable_current_limit()->set_unit(service::RateLimitResponse::RateLimit::WEEK);
  status->set_limit_remaining(3);
  status->mutable_duration_until_reset()->set_seconds(4);
  status->mutable_quota()->set_requests(1);
  status->mutable_quota()->mutable_valid_until()->set_seconds(5);
  status->mutable_quota()->set_id("q");
  core::HeaderValue* header = response.add_response_headers_to_add();
  header->set_key("a");
  header->set_value("b");
  header->set_raw_value("c");
  header = response.add_request_headers_to_add();
  header->set_key("x");
  header->set_value("y");
  response.set_raw_body("no");
  (*response.mutable_dynamic_metadata()->mutable_fields())["k"].set_string_value("v");
  response.mutable_quota()->set_requests(2);
  response.mutable_quota()->set_id("z");

  // clang-format off
  const std::string expected = Bytes({
      Tag(1, kVarint), 2,                           // overall_code = 1 (OVER_LIMIT = 2)
      Tag(2, kLen), 28,                             // statuses = 2
           Tag(1, kVarint), 2,                      //   code = 1
           Tag(2, kLen), 7,                         //   current_limit = 2
               Tag(1, kVarint), 10,                 //     requests_per_unit = 1
               Tag(2, kVarint), 7,                  //     unit = 2 (WEEK = 7)
               Tag(3, kLen), 1, 'n',                //     name = 3
           Tag(3, kVarint), 3,                      //   limit_remaining = 3
           Tag(4, kLen), 2, Tag(1, kVarint), 4,     //   duration_until_reset = 4 (seconds = 1)
           Tag(5, kLen), 9,                         //   quota = 5
               Tag(1, kVarint), 1,                  //     requests = 1
               Tag(2, kLen), 2, Tag(1, kVarint), 5, //     valid_until = 2 (seconds = 1)
               Tag(3, kLen), 1, 'q',                //     id = 3
      Tag(3, kLen), 9,                              // response_headers_to_add = 3
           Tag(1, kLen), 1, 'a',                    //   key = 1
           Tag(2, kLen), 1, 'b',                    //   value = 2
           Tag(3, kLen), 1, 'c',                    //   raw_value = 3
      Tag(4, kLen), 6,                              // request_headers_to_add = 4
           Tag(1, kLen), 1, 'x',                    //
           Tag(2, kLen), 1, 'y',                    //
      Tag(5, kLen), 2, 'n', 'o',                    // raw_body = 5
      Tag(6, kLen), 10,                             // dynamic_metadata = 6 (Struct)
           Tag(1, kLen), 8,                         //   fields = 1 (map entry)
               Tag(1, kLen), 1, 'k',                //     key = 1
               Tag(2, kLen), 3,                     //     value = 2 (Value)
                  Tag(3, kLen), 1, 'v',             //       string_value = 3
      Tag(7, kLen), 5,                              // quota = 7
           Tag(1, kVarint), 2,                      //   requests = 1
           Tag(3, kLen), 1, 'z',                    //   id = 3
  });
  // clang-format on
  EXPECT_EQ(Serialize(response), expected);

  service::RateLimitResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(expected));
  EXPECT_EQ(parsed.statuses(0).current_limit().unit(), service::RateLimitResponse::RateLimit::WEEK);
  EXPECT_EQ(parsed.statuses(0).current_limit().name(), "n");
  EXPECT_EQ(parsed.statuses(0).quota().id(), "q");
  EXPECT_EQ(parsed.request_headers_to_add(0).value(), "y");
  EXPECT_EQ(parsed.raw_body(), "no");
  EXPECT_EQ(parsed.quota().requests(), 2u);
  EXPECT_TRUE(parsed.GetReflection()->GetUnknownFields(parsed).empty());
}

TEST(RlsProtoWire, HeaderValueOption) {
  core::HeaderValueOption option;
  option.mutable_header()->set_key("h");
  option.mutable_header()->set_value("v");
  // `append` is deprecated (by Envoy too) but still on the wire.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  option.mutable_append()->set_value(false);
#pragma GCC diagnostic pop
  option.set_append_action(core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
  option.set_keep_empty_value(true);
  // clang-format off
  EXPECT_EQ(Serialize(option), Bytes({
      Tag(1, kLen), 6,                              // header = 1
           Tag(1, kLen), 1, 'h',                    //   key = 1
           Tag(2, kLen), 1, 'v',                    //   value = 2
      Tag(2, kLen), 0,                              // append = 2 (BoolValue false: empty)
      Tag(3, kVarint), 2,                           // append_action = 3
      Tag(4, kVarint), 1,                           // keep_empty_value = 4
  }));
  // clang-format on
  EXPECT_EQ(core::HeaderValueOption::APPEND_IF_EXISTS_OR_ADD, 0);
  EXPECT_EQ(core::HeaderValueOption::ADD_IF_ABSENT, 1);
  EXPECT_EQ(core::HeaderValueOption::OVERWRITE_IF_EXISTS, 3);
}

TEST(RlsProtoWire, EnumNumbers) {
  using Response = service::RateLimitResponse;
  EXPECT_EQ(Response::UNKNOWN, 0);
  EXPECT_EQ(Response::OK, 1);
  EXPECT_EQ(Response::OVER_LIMIT, 2);
  // Unit's numbers are the ones rls::Unit uses; WEEK came last.
  EXPECT_EQ(Response::RateLimit::UNKNOWN, 0);
  EXPECT_EQ(Response::RateLimit::SECOND, static_cast<int>(Unit::kSecond));
  EXPECT_EQ(Response::RateLimit::MINUTE, static_cast<int>(Unit::kMinute));
  EXPECT_EQ(Response::RateLimit::HOUR, static_cast<int>(Unit::kHour));
  EXPECT_EQ(Response::RateLimit::DAY, static_cast<int>(Unit::kDay));
  EXPECT_EQ(Response::RateLimit::MONTH, static_cast<int>(Unit::kMonth));
  EXPECT_EQ(Response::RateLimit::YEAR, static_cast<int>(Unit::kYear));
  EXPECT_EQ(Response::RateLimit::WEEK, static_cast<int>(Unit::kWeek));
  // The override's unit (envoy.type.v3.RateLimitUnit) numbers the same, without WEEK.
  EXPECT_EQ(envoy::type::v3::SECOND, 1);
  EXPECT_EQ(envoy::type::v3::YEAR, 6);
  EXPECT_EQ(envoy::type::v3::RateLimitUnit_MAX, 6);
}

TEST(RlsProtoWire, ServiceAndMethodNames) {
  EXPECT_STREQ(service::RateLimitService::service_full_name(),
               "envoy.service.ratelimit.v3.RateLimitService");
  const google::protobuf::MethodDescriptor* method =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          "envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->input_type()->full_name(), "envoy.service.ratelimit.v3.RateLimitRequest");
  EXPECT_EQ(method->output_type()->full_name(), "envoy.service.ratelimit.v3.RateLimitResponse");
  EXPECT_FALSE(method->client_streaming());
  EXPECT_FALSE(method->server_streaming());
  EXPECT_EQ(common::RateLimitDescriptor::descriptor()->full_name(),
            "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor");
  EXPECT_EQ(core::HeaderValue::descriptor()->full_name(), "envoy.config.core.v3.HeaderValue");
}

}  // namespace
}  // namespace sluice::rls
