// Descriptor values of a megabyte in the real `sluice serve` (its path is the first argument of
// this test program): the rate limit service's stats name a detailed_metric descriptor by its
// value, and gRPC takes values of up to about 4 MB, yet a thousand such calls leave the process's
// memory where it was and /metrics small (rls/stats.h: a long value is counted under its hash).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "support/redis_faults.h"
#include "support/serve_process.h"

namespace sluice::testing {
namespace {

namespace pb = envoy::service::ratelimit::v3;

constexpr int kCalls = 1000;
constexpr size_t kValueBytes = size_t{1} << 20;
// What the process may grow by over the calls: malloc's arenas keep some of the freed request
// buffers (each call holds a few copies of its value while it is decided), measured at 2 to 5 MB
// whether after 1 000 calls or 3 000; the stats and store entries of 1 000 keys are 0.7 MB.
constexpr size_t kMaxGrowth = size_t{8} << 20;
// What a scrape may add: the exposition, and its copies on the way to the socket.
constexpr size_t kMaxScrapeGrowth = size_t{4} << 20;
// The whole /metrics: the rls counters of a thousand hashed keys (about 0.5 MB; at most 2.8 MB
// whatever the keys, Stats::kMaxExpositionBytes) and the HTTP service's own.
constexpr size_t kMaxMetricsBytes = size_t{1} << 20;

TEST(ServeRlsMemory, AThousandMegabyteValuesLeaveMemoryAndMetricsBounded) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::filesystem::create_directory(dir.File("rls"));
  WriteFile(dir.File("rls/api.yaml"),
            "domain: api\ndescriptors:\n  - key: user\n    detailed_metric: true\n"
            "    rate_limit: { unit: day, requests_per_unit: 1000000 }\n");
  const int grpc_port = FreeLoopbackPort();
  Service service("rls: { config_dir: \"" + dir.File("rls") + "\", grpc_listen: \"127.0.0.1:" +
                  std::to_string(grpc_port) + "\", watch: false }\n" +
                  "rules:\n  - { name: api, algorithm: gcra, limit: 10, period: 1s }\n");
  ASSERT_TRUE(service.up()) << service.process().Log();
  auto stub = pb::RateLimitService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials()));

  pb::RateLimitRequest request;
  request.set_domain("api");
  auto* entry = request.add_descriptors()->add_entries();
  entry->set_key("user");
  std::string value(kValueBytes, 'v');
  // A distinct value per call, so that each would be a stats key of its own.
  const auto call = [&](int i) {
    const std::string tag = std::to_string(i) + "-";
    value.replace(0, tag.size(), tag);
    entry->set_value(value);
    pb::RateLimitResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = stub->ShouldRateLimit(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.overall_code(), pb::RateLimitResponse::OK);
  };
  // Warm: the server's threads, their arenas and buffers have seen such calls.
  for (int i = 0; i < 100; ++i) ASSERT_NO_FATAL_FAILURE(call(kCalls + i));
  const size_t before = ResidentBytes(service.process().pid());
  ASSERT_GT(before, 0u);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) ASSERT_NO_FATAL_FAILURE(call(i));
  const size_t after = ResidentBytes(service.process().pid());
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  std::printf("%d calls of %zu-byte values in %lld ms: RSS %zu -> %zu bytes\n", kCalls, kValueBytes,
              static_cast<long long>(took.count()), before, after);
  // Asserted: a process that kept the values would make the scrape below gigabytes.
  ASSERT_LT(after, before + kMaxGrowth);

  auto metrics = service.Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  const size_t peak = ResidentBytes(service.process().pid());
  std::printf("/metrics: %zu bytes; RSS after it %zu bytes\n", metrics->body.size(), peak);
  EXPECT_LT(metrics->body.size(), kMaxMetricsBytes);
  EXPECT_LT(peak, after + kMaxScrapeGrowth);
  EXPECT_EQ(metrics->body.find("vvvv"), std::string::npos) << "no value is kept in the stats";
  EXPECT_EQ(service.process().Stop(std::chrono::seconds(10)), 0) << service.process().Log();
}

}  // namespace
}  // namespace sluice::testing
