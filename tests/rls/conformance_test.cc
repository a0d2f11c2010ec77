// The rate limit service over gRPC, as Envoy calls it: a GrpcServer on a loopback port answering
// from envoyproxy/ratelimit configurations, over a MemoryStore on a manual clock (and, for the
// store's outage, a real redis-server). Every answer is read back through the generated client.
// The vectors of RlsReadmeVectors are written from envoyproxy/ratelimit's README examples.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "matcher_from.h"
#include "rls/grpc_server.h"
#include "rls/service.h"
#include "rls/stats.h"
#include "sluice/memory_store.h"
#include "sluice/open_store.h"
#include "sluice/resilient_store.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace sluice::rls {
namespace {

using Code = pb::RateLimitResponse::Code;
using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr Code kOk = pb::RateLimitResponse::OK;
constexpr Code kOver = pb::RateLimitResponse::OVER_LIMIT;
constexpr uint32_t kUnlimitedRemaining = std::numeric_limits<uint32_t>::max();

// A request descriptor: its entries, and optionally its own hits_addend and limit override.
struct Desc {
  using Entries = std::vector<std::pair<std::string, std::string>>;
  explicit Desc(std::initializer_list<std::pair<std::string, std::string>> e) : entries(e) {}
  Desc Hits(uint64_t n) const {
    Desc d = *this;
    d.hits = n;
    return d;
  }
  Desc Override(uint32_t requests_per_unit, uint32_t unit) const {
    Desc d = *this;
    d.override = std::pair{requests_per_unit, unit};
    return d;
  }

  Entries entries;
  std::optional<uint64_t> hits;
  std::optional<std::pair<uint32_t, uint32_t>> override;  // requests_per_unit, unit number
};

std::shared_ptr<const ServiceConfig> Configure(std::initializer_list<std::string_view> files,
                                               ServiceOptions options) {
  return std::make_shared<const ServiceConfig>(
      ServiceConfig{.matcher = MatcherFrom(files), .options = options});
}

class RlsConformance : public ::testing::Test {
 protected:
  // Serves `files` over `store` (the fixture's MemoryStore when null).
  void Serve(std::initializer_list<std::string_view> files, ServiceOptions options = {},
             Store* store = nullptr) {
    if (server_) server_->Shutdown(seconds(5));
    service_ =
        std::make_unique<Service>(store ? *store : store_, stats_, Configure(files, options));
    server_ = std::make_unique<GrpcServer>(*service_);
    ASSERT_TRUE(server_->Start("127.0.0.1:0").ok());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = pb::RateLimitService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(seconds(5));
  }

  grpc::Status Call(const std::string& domain, const std::vector<Desc>& descriptors,
                    uint32_t hits_addend, pb::RateLimitResponse& response) {
    pb::RateLimitRequest request;
    request.set_domain(domain);
    request.set_hits_addend(hits_addend);
    for (const Desc& d : descriptors) {
      auto* descriptor = request.add_descriptors();
      for (const auto& [key, value] : d.entries) {
        auto* entry = descriptor->add_entries();
        entry->set_key(key);
        entry->set_value(value);
      }
      if (d.hits) descriptor->mutable_hits_addend()->set_value(*d.hits);
      if (d.override) {
        descriptor->mutable_limit()->set_requests_per_unit(d.override->first);
        descriptor->mutable_limit()->set_unit(
            static_cast<envoy::type::v3::RateLimitUnit>(d.override->second));
      }
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    return stub_->ShouldRateLimit(&context, request, &response);
  }

  pb::RateLimitResponse Ask(const std::string& domain, const std::vector<Desc>& descriptors,
                            uint32_t hits_addend = 0) {
    pb::RateLimitResponse response;
    const grpc::Status status = Call(domain, descriptors, hits_addend, response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.statuses_size(), static_cast<int>(descriptors.size()));
    return response;
  }

  // The remaining of a descriptor's limit, seen by a peek (hits_addend 0 on the descriptor).
  uint32_t Remaining(const std::string& domain, Desc d) {
    d.hits = 0;
    const auto response = Ask(domain, {d});
    return response.statuses_size() == 1 ? response.statuses(0).limit_remaining() : 0;
  }

  static std::string Header(const pb::RateLimitResponse& response, std::string_view name) {
    for (const auto& header : response.response_headers_to_add()) {
      if (header.key() == name) return header.value();
    }
    return "(absent)";
  }

  // At a whole hour since the epoch, where that service's (and sluice's fixed_window's) minute and
  // hour windows start.
  ManualClock clock_{Time(seconds(1'699'999'200))};
  MemoryStore store_{MemoryStoreOptions{.clock = &clock_}};
  Stats stats_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
};

constexpr std::string_view kPrecedence = R"(
domain: web
descriptors:
  - key: path
    rate_limit: { unit: second, requests_per_unit: 30 }
  - key: path
    value: /api/*
    rate_limit: { unit: second, requests_per_unit: 20 }
  - key: path
    value: /api/login
    rate_limit: { unit: second, requests_per_unit: 10 }
)";

TEST_F(RlsConformance, ExactValueBeforeWildcardBeforeKeyOnly) {
  Serve({kPrecedence});
  const auto response = Ask("web", {Desc({{"path", "/api/login"}}), Desc({{"path", "/api/users"}}),
                                    Desc({{"path", "/home"}})});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).current_limit().requests_per_unit(), 10u);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 9u);
  EXPECT_EQ(response.statuses(1).current_limit().requests_per_unit(), 20u);
  EXPECT_EQ(response.statuses(2).current_limit().requests_per_unit(), 30u);
  EXPECT_EQ(response.statuses(2).current_limit().unit(), pb::RateLimitResponse::RateLimit::SECOND);
}

TEST_F(RlsConformance, UnmatchedDescriptorsAndUnknownDomainsAreOkAndCountNothing) {
  Serve({kPrecedence});
  auto response = Ask("web", {Desc({{"host", "a"}})});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).code(), kOk);
  EXPECT_FALSE(response.statuses(0).has_current_limit());
  EXPECT_EQ(response.response_headers_to_add_size(), 0);
  response = Ask("elsewhere", {Desc({{"path", "/home"}})});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_FALSE(response.statuses(0).has_current_limit());
}

TEST_F(RlsConformance, EmptyDomainOrNoDescriptorIsInvalidArgument) {
  Serve({kPrecedence});
  pb::RateLimitResponse response;
  EXPECT_EQ(Call("", {Desc({{"path", "/"}})}, 0, response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Call("web", {}, 0, response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A value of any length is counted, under the hash of its key once that is above kMaxKeyBytes, as
// the middleware's keys are: a long value cannot turn the whole request into an error (which
// Envoy, failing open, would admit uncounted).
TEST_F(RlsConformance, ALongValueIsCountedUnderItsHashAlongWithTheOthers) {
  Serve({kPrecedence});
  const std::string long_path = "/" + std::string(kMaxKeyBytes, 'x');
  const std::string other_long_path = long_path + "y";
  for (uint32_t remaining : {29u, 28u}) {
    const auto response = Ask("web", {Desc({{"path", long_path}}), Desc({{"path", "/home"}})});
    EXPECT_EQ(response.overall_code(), kOk);
    EXPECT_EQ(response.statuses(0).limit_remaining(), remaining);
    EXPECT_EQ(response.statuses(1).limit_remaining(), remaining);
  }
  EXPECT_EQ(Remaining("web", Desc({{"path", other_long_path}})), 30u) << "a counter of its own";
}

// The matching costs more than linear time in the descriptors: a request of more than one
// CheckAll decides is refused before it, whatever its size.
TEST_F(RlsConformance, MoreDescriptorsThanOneCallDecidesAreRefused) {
  Serve({kPrecedence});
  std::vector<Desc> descriptors;
  for (size_t i = 0; i < kMaxCheckAll; ++i) {
    descriptors.push_back(Desc({{"path", "/" + std::to_string(i)}}));
  }
  EXPECT_EQ(Ask("web", descriptors).overall_code(), kOk);
  descriptors.push_back(Desc({{"path", "/last"}}));
  pb::RateLimitResponse response;
  const grpc::Status status = Call("web", descriptors, 0, response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("at most 256 descriptors, got 257"), std::string::npos)
      << status.error_message();
}

// Hits above the limit are over without asking the store, and no wait would admit them: no
// Retry-After, rather than an empty one.
TEST_F(RlsConformance, HitsAboveTheLimitAreOverWithNoRetryAfter) {
  Serve({kPrecedence});
  const auto response = Ask("web", {Desc({{"path", "/api/login"}}).Hits(11)});
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(Header(response, "Retry-After"), "(absent)");
  EXPECT_NE(Header(response, "RateLimit"), "(absent)");
}

TEST_F(RlsConformance, NegativeHitsAreRefused) {
  Serve({kPrecedence});
  pb::RateLimitRequest request;
  request.set_domain("web");
  auto* descriptor = request.add_descriptors();
  auto* entry = descriptor->add_entries();
  entry->set_key("path");
  entry->set_value("/home");
  descriptor->set_is_negative_hits(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(10));
  pb::RateLimitResponse response;
  EXPECT_EQ(stub_->ShouldRateLimit(&context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(stats_.For("web.path").total_hits.load(), 0u);
}

constexpr std::string_view kUser = R"(
domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5, name: per_user }
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 100 }
)";

TEST_F(RlsConformance, HitsAddendZeroMeansOneAndDescriptorsOverrideIt) {
  Serve({kUser});
  const Desc user = Desc({{"user", "u1"}});
  EXPECT_EQ(Ask("api", {user}, 0).statuses(0).limit_remaining(), 4u);  // 0 means 1
  EXPECT_EQ(Ask("api", {user}, 2).statuses(0).limit_remaining(), 2u);
  // A descriptor's own hits_addend replaces the request's.
  EXPECT_EQ(Ask("api", {Desc({{"user", "u1"}}).Hits(1)}, 3).statuses(0).limit_remaining(), 1u);
  // Its 0 peeks: the remaining is reported and nothing is consumed.
  EXPECT_EQ(Remaining("api", user), 1u);
  EXPECT_EQ(Remaining("api", user), 1u);
  // Hits above what is left are over the limit and consume nothing.
  const auto over = Ask("api", {user}, 2);
  EXPECT_EQ(over.overall_code(), kOver);
  EXPECT_EQ(Remaining("api", user), 1u);
  // Hits above the whole limit are over it without a store round trip.
  EXPECT_EQ(Ask("api", {user}, 6).overall_code(), kOver);
  EXPECT_EQ(Remaining("api", user), 1u);
}

TEST_F(RlsConformance, RequestLimitOverrideReplacesTheConfiguredLimit) {
  Serve({kUser});
  const Desc overridden = Desc({{"user", "u2"}}).Override(2, 3);  // 2 per hour
  auto response = Ask("api", {overridden});
  EXPECT_EQ(response.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(response.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::HOUR);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(Ask("api", {overridden}).overall_code(), kOk);
  EXPECT_EQ(Ask("api", {overridden}).overall_code(), kOver);
  // The configured limit of the same descriptor is counted apart.
  EXPECT_EQ(Ask("api", {Desc({{"user", "u2"}})}).statuses(0).limit_remaining(), 4u);
  // An override with no unit is refused.
  pb::RateLimitResponse refused;
  EXPECT_EQ(Call("api", {Desc({{"user", "u2"}}).Override(2, 0)}, 0, refused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RlsConformance, ADeniedRequestChargesNoneOfItsDescriptors) {
  Serve({kUser});
  const Desc user = Desc({{"user", "u3"}});
  const Desc tenant = Desc({{"tenant", "t"}});
  EXPECT_EQ(Ask("api", {user, tenant}, 5).overall_code(), kOk);
  EXPECT_EQ(Remaining("api", tenant), 95u);
  const auto denied = Ask("api", {user, tenant});
  EXPECT_EQ(denied.overall_code(), kOver);
  EXPECT_EQ(denied.statuses(0).code(), kOver);
  EXPECT_EQ(denied.statuses(1).code(), kOk);  // within its own limit, only held back
  EXPECT_EQ(Remaining("api", tenant), 95u);
  EXPECT_EQ(Header(denied, "Retry-After"), "60");
  // Two descriptors on one counter are one check of their hits together.
  EXPECT_EQ(Ask("api", {tenant, tenant}, 40).overall_code(), kOk);
  EXPECT_EQ(Remaining("api", tenant), 15u);
}

constexpr std::string_view kTwoLimits = R"(
domain: multi
descriptors:
  - key: client
    rate_limits:
      - { unit: second, requests_per_unit: 2, name: burst }
      - { unit: hour, requests_per_unit: 3, name: hourly, algorithm: sliding_window }
)";

TEST_F(RlsConformance, SeveralLimitsOnOneDescriptorAreAllOrNothing) {
  Serve({kTwoLimits});
  const Desc client = Desc({{"client", "c"}});
  auto response = Ask("multi", {client}, 2);
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).current_limit().name(), "burst");  // the fewest remaining
  EXPECT_EQ(response.statuses(0).limit_remaining(), 0u);
  response = Ask("multi", {client});
  EXPECT_EQ(response.overall_code(), kOver);  // the second's limit, not the hour's
  EXPECT_EQ(response.statuses(0).current_limit().name(), "burst");
  clock_.Advance(seconds(1));
  // The hour's limit was not charged by the denied request: one left.
  response = Ask("multi", {client});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).current_limit().name(), "hourly");
  EXPECT_EQ(response.statuses(0).limit_remaining(), 0u);
  clock_.Advance(seconds(1));
  response = Ask("multi", {client});
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(response.statuses(0).current_limit().name(), "hourly");
}

constexpr std::string_view kShadow = R"(
domain: soft
descriptors:
  - key: user
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: ip
    rate_limit: { unit: minute, requests_per_unit: 1 }
)";

TEST_F(RlsConformance, ShadowModeDecidesAndCountsButNeverDenies) {
  Serve({kShadow});
  const Desc user = Desc({{"user", "u"}});
  const Desc ip = Desc({{"ip", "1"}});
  EXPECT_EQ(Ask("soft", {user, ip}).overall_code(), kOk);
  const auto response = Ask("soft", {user});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).code(), kOk);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 0u);
  // The shadow descriptor's breach neither denies nor holds back the enforced one.
  const auto both = Ask("soft", {user, Desc({{"ip", "2"}})});
  EXPECT_EQ(both.overall_code(), kOk);
  EXPECT_EQ(Remaining("soft", Desc({{"ip", "2"}})), 0u);
  const DescriptorCounters& counters = stats_.For("soft.user");
  EXPECT_EQ(counters.total_hits.load(), 3u);
  EXPECT_EQ(counters.over_limit.load(), 2u);
  EXPECT_EQ(counters.shadow_mode.load(), 2u);
  EXPECT_EQ(counters.within_limit.load(), 1u);
}

TEST_F(RlsConformance, GlobalShadowModeAdmitsEverything) {
  Serve({kShadow}, ServiceOptions{.shadow_mode = true});
  const Desc ip = Desc({{"ip", "1"}});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Ask("soft", {ip}).overall_code(), kOk);
  EXPECT_EQ(stats_.For("soft.ip").shadow_mode.load(), 2u);
  EXPECT_EQ(stats_.For("soft.ip").over_limit.load(), 2u);
}

constexpr std::string_view kHeaders = R"(
domain: hdr
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10, name: api }
  - key: zero
    rate_limit: { unit: second, requests_per_unit: 0 }
)";

TEST_F(RlsConformance, ResponseHeadersCarryTheMostConstrainedLimit) {
  Serve({kHeaders}, ServiceOptions{.x_ratelimit_headers = true});
  const auto response = Ask("hdr", {Desc({{"user", "u"}})}, 4);
  EXPECT_EQ(Header(response, "RateLimit-Policy"), "\"api\";q=10;w=60");
  EXPECT_EQ(Header(response, "RateLimit"), "\"api\";r=6;t=60");
  EXPECT_EQ(Header(response, "Retry-After"), "(absent)");
  EXPECT_EQ(Header(response, "X-RateLimit-Limit"), "10");
  EXPECT_EQ(Header(response, "X-RateLimit-Remaining"), "6");
  EXPECT_EQ(Header(response, "X-RateLimit-Reset"), "60");
  EXPECT_EQ(response.statuses(0).duration_until_reset().seconds(), 60);
}

TEST_F(RlsConformance, XRateLimitHeadersOnlyWhenAskedFor) {
  Serve({kHeaders});
  const auto response = Ask("hdr", {Desc({{"user", "u"}})});
  EXPECT_EQ(Header(response, "RateLimit"), "\"api\";r=9;t=60");
  EXPECT_EQ(Header(response, "X-RateLimit-Limit"), "(absent)");
}

TEST_F(RlsConformance, ZeroRequestsPerUnitIsAlwaysOverAndChargesNothingElse) {
  Serve({kHeaders});
  const Desc user = Desc({{"user", "u"}});
  const auto response = Ask("hdr", {user, Desc({{"zero", "z"}})});
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(response.statuses(0).code(), kOk);
  EXPECT_EQ(response.statuses(1).code(), kOver);
  EXPECT_EQ(Remaining("hdr", user), 10u);
}

TEST_F(RlsConformance, HealthIsServing) {
  Serve({kHeaders});
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(10));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(RlsConformance, ReloadSwapsTheConfigurationForLaterCalls) {
  Serve({kUser});
  const Desc user = Desc({{"user", "r"}});
  EXPECT_EQ(Ask("api", {user}).statuses(0).current_limit().requests_per_unit(), 5u);
  service_->SetConfig(Configure({R"(
domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 7 }
)"},
                                {}));
  EXPECT_EQ(Ask("api", {user}).statuses(0).current_limit().requests_per_unit(), 7u);
}

constexpr std::string_view kQuotas = R"(
domain: quota
descriptors:
  - key: plan
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: pool
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: team
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: ip
    rate_limit: { unit: minute, requests_per_unit: 10 }
)";

TEST_F(RlsConformance, QuotasDenyOnlyWhenEveryOneIsOverAndThoseOverConsumeNothing) {
  Serve({kQuotas});
  const Desc plan = Desc({{"plan", "p"}});
  const Desc pool = Desc({{"pool", "s"}});
  const Desc ip = Desc({{"ip", "1"}});
  for (int i = 0; i < 2; ++i) EXPECT_EQ(Ask("quota", {plan, pool, ip}).overall_code(), kOk);
  // The plan is spent: the pool admits, and the plan, over, consumes nothing.
  auto response = Ask("quota", {plan, pool, ip});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).code(), kOver);
  EXPECT_EQ(response.statuses(1).code(), kOk);
  EXPECT_EQ(response.statuses(1).limit_remaining(), 0u);
  EXPECT_EQ(Header(response, "Retry-After"), "(absent)");
  EXPECT_EQ(Remaining("quota", plan), 0u);
  EXPECT_EQ(Remaining("quota", ip), 7u);
  EXPECT_EQ(stats_.For("quota.plan").over_limit.load(), 1u);
  // Every quota over: denied, and nothing consumed.
  response = Ask("quota", {plan, pool, ip});
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(response.statuses(0).code(), kOver);
  EXPECT_EQ(response.statuses(1).code(), kOver);
  EXPECT_EQ(response.statuses(2).code(), kOk);
  EXPECT_EQ(Header(response, "Retry-After"), "60");
  EXPECT_EQ(Remaining("quota", ip), 7u);
}

TEST_F(RlsConformance, ADescriptorOutOfQuotaModeOverDeniesWhateverTheQuotas) {
  Serve({kQuotas});
  const Desc ip = Desc({{"ip", "2"}});
  EXPECT_EQ(Ask("quota", {ip.Hits(10)}).overall_code(), kOk);
  const Desc plan = Desc({{"plan", "q"}});
  const auto response = Ask("quota", {plan, ip});
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(response.statuses(0).code(), kOk);
  EXPECT_EQ(Remaining("quota", plan), 2u);
}

// Hits above a quota's capacity are over without asking the store; the quota is still peeked, and
// the others decide.
TEST_F(RlsConformance, AQuotaOverWithoutAskingTheStoreLeavesTheOthersToDecide) {
  Serve({kQuotas});
  const Desc plan = Desc({{"plan", "r"}});
  const Desc pool = Desc({{"pool", "r"}});
  const auto response = Ask("quota", {plan.Hits(3), pool.Hits(1)});
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).code(), kOver);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 2u);
  EXPECT_EQ(Remaining("quota", plan), 2u);
  EXPECT_EQ(Remaining("quota", pool), 2u);
  EXPECT_EQ(Ask("quota", {plan.Hits(3), pool.Hits(4)}).overall_code(), kOver);
  EXPECT_EQ(Remaining("quota", pool), 2u);
}

// The service's quota_mode puts every descriptor in quota mode but the unlimited ones; one that
// matches no limit is a quota that is never over, as in that service.
TEST_F(RlsConformance, GlobalQuotaModeTakesInEveryDescriptorButTheUnlimited) {
  Serve({R"(
domain: g
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: b
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: vip
    rate_limit: { unlimited: true }
)"},
        ServiceOptions{.quota_mode = true});
  const Desc a = Desc({{"a", "1"}});
  const Desc b = Desc({{"b", "1"}});
  EXPECT_EQ(Ask("g", {a}).overall_code(), kOk);
  EXPECT_EQ(Ask("g", {a}).overall_code(), kOver);
  EXPECT_EQ(Ask("g", {a, b}).overall_code(), kOk);
  EXPECT_EQ(Remaining("g", b), 0u);
  EXPECT_EQ(Ask("g", {a, b}).overall_code(), kOver);
  EXPECT_EQ(Ask("g", {a, Desc({{"unmatched", "x"}})}).overall_code(), kOk);
  EXPECT_EQ(Ask("g", {a, Desc({{"vip", "x"}})}).overall_code(), kOver);
}

// Forwards to a store, and just before the CheckAll numbered `race_on_call` (from 1), takes one
// unit of its first request's counter as another client would.
class RacedStore final : public Store {
 public:
  explicit RacedStore(Store& backend) : backend_(backend) {}
  int calls() const { return calls_.load(); }
  std::atomic<int> race_on_call{0};

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    backend_.CheckBatchAsync(requests, std::move(done));
  }
  void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) override {
    backend_.ResetAsync(scope, key, std::move(done));
  }
  void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) override {
    if (++calls_ == race_on_call.load()) {
      CheckRequest taken = requests.front();
      taken.cost = 1;
      EXPECT_TRUE(backend_.Check(taken).ok());
    }
    backend_.CheckAllAsync(requests, std::move(done));
  }

 private:
  Store& backend_;
  std::atomic<int> calls_{0};
};

// The second decision, without the quotas over, is refused too: another client took the last
// unit of one of the quotas left. That refusal is the answer, though a third quota was within,
// and the request consumes nothing.
TEST_F(RlsConformance, AQuotaRacedAwayBetweenTheTwoDecisionsDeniesAndConsumesNothing) {
  RacedStore raced(store_);
  Serve({kQuotas}, {}, &raced);
  const Desc plan = Desc({{"plan", "t"}});
  const Desc pool = Desc({{"pool", "t"}});
  const Desc team = Desc({{"team", "t"}});
  const Desc ip = Desc({{"ip", "t"}});
  EXPECT_EQ(Ask("quota", {plan.Hits(2), pool.Hits(2), ip}).overall_code(), kOk);
  raced.race_on_call = raced.calls() + 2;  // the request's second CheckAll: pool, team, ip
  const auto response = Ask("quota", {plan, pool, team, ip});
  EXPECT_EQ(raced.calls(), raced.race_on_call.load());
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(response.statuses(0).code(), kOver);
  EXPECT_EQ(response.statuses(1).code(), kOver);
  EXPECT_EQ(response.statuses(2).code(), kOk);  // within, held back
  EXPECT_EQ(Remaining("quota", pool), 0u);
  EXPECT_EQ(Remaining("quota", team), 5u);
  EXPECT_EQ(Remaining("quota", ip), 9u);
}

// envoyproxy/ratelimit's README, Examples 1 to 11, each checked as it documents the decision.
class RlsReadmeVectors : public RlsConformance {};

TEST_F(RlsReadmeVectors, Example1TwoValuesOfOneKey) {
  Serve({R"(
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: { unit: second, requests_per_unit: 500 }
  - key: database
    value: default
    rate_limit: { unit: second, requests_per_unit: 500 }
)"});
  auto response = Ask("mongo_cps", {Desc({{"database", "users"}})}, 500);
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(Ask("mongo_cps", {Desc({{"database", "users"}})}).overall_code(), kOver);
  EXPECT_EQ(Ask("mongo_cps", {Desc({{"database", "default"}})}).overall_code(), kOk);
  EXPECT_FALSE(Ask("mongo_cps", {Desc({{"database", "other"}})}).statuses(0).has_current_limit());
}

TEST_F(RlsReadmeVectors, Example2NestedDescriptorsAndALogicalOr) {
  Serve({R"(
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: { unit: day, requests_per_unit: 5 }
  - key: to_number
    rate_limit: { unit: day, requests_per_unit: 100 }
)"});
  const Desc marketing = Desc({{"message_type", "marketing"}, {"to_number", "2061111111"}});
  const Desc number = Desc({{"to_number", "2061111111"}});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Ask("messaging", {marketing, number}).overall_code(), kOk);
  const auto sixth = Ask("messaging", {marketing, number});
  EXPECT_EQ(sixth.overall_code(), kOver);
  EXPECT_EQ(sixth.statuses(0).code(), kOver);
  EXPECT_EQ(sixth.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::DAY);
  // Each number gets its own 5 marketing messages.
  EXPECT_EQ(Ask("messaging", {Desc({{"message_type", "marketing"}, {"to_number", "2062222222"}})})
                .overall_code(),
            kOk);
  EXPECT_EQ(Remaining("messaging", number), 95u);
}

TEST_F(RlsReadmeVectors, Example3KeyValueBeforeKeyAlone) {
  Serve({R"(
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: remote_address
    value: 50.0.0.5
    rate_limit: { unit: second, requests_per_unit: 0 }
)"});
  EXPECT_EQ(Ask("edge_proxy_per_ip", {Desc({{"remote_address", "50.0.0.1"}})}, 10).overall_code(),
            kOk);
  EXPECT_EQ(Ask("edge_proxy_per_ip", {Desc({{"remote_address", "50.0.0.5"}})}).overall_code(),
            kOver);
}

TEST_F(RlsReadmeVectors, Example4TheRequestsDepthMustMatchTheTrees) {
  Serve({R"(
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit: { requests_per_unit: 300, unit: second }
)"});
  const Desc deep = Desc({{"key", "value"}, {"subkey", "subvalue"}});
  EXPECT_FALSE(Ask("example4", {deep}).statuses(0).has_current_limit());
  Serve({R"(
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit: { requests_per_unit: 300, unit: second }
)"});
  EXPECT_EQ(Ask("example4", {deep}).statuses(0).current_limit().requests_per_unit(), 300u);
}

TEST_F(RlsReadmeVectors, Example5UnlimitedIsOkWithMaxRemaining) {
  Serve({R"(
domain: internal
descriptors:
  - key: ldap
    rate_limit: { unlimited: true }
  - key: azure
    rate_limit: { unit: minute, requests_per_unit: 100 }
)"});
  const auto response = Ask("internal", {Desc({{"ldap", "x"}}), Desc({{"azure", "y"}})}, 100);
  EXPECT_EQ(response.overall_code(), kOk);
  EXPECT_EQ(response.statuses(0).limit_remaining(), kUnlimitedRemaining);
  EXPECT_EQ(response.statuses(1).limit_remaining(), 0u);
}

TEST_F(RlsReadmeVectors, Example6ShadowModeForOneUserOnly) {
  Serve({R"(
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: { requests_per_unit: 10, unit: second }
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: { requests_per_unit: 20, unit: second }
)"});
  const Desc a = Desc({{"service", "auth-service"}, {"user", "user-a"}});
  const Desc b = Desc({{"service", "auth-service"}, {"user", "user-b"}});
  EXPECT_EQ(Ask("example6", {a}, 50).overall_code(), kOk);
  EXPECT_EQ(Ask("example6", {b}, 20).overall_code(), kOk);
  EXPECT_EQ(Ask("example6", {b}).overall_code(), kOver);
  EXPECT_EQ(stats_.For("example6.service.user_user-a").shadow_mode.load(), 50u);
}

TEST_F(RlsReadmeVectors, Example7ReplacesDropsTheNamedLimit) {
  Serve({R"(
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: { name: specific_limit, requests_per_unit: 5, unit: second }
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces: [ { name: specific_limit } ]
          requests_per_unit: 10
          unit: second
)"});
  const Desc first = Desc({{"key_1", "value_1"}, {"user", "bkthomps"}});
  const Desc second = Desc({{"key_2", "value_2"}, {"user", "bkthomps"}});
  // Both together: only 10 per second applies.
  const auto both = Ask("example7", {first, second}, 8);
  EXPECT_EQ(both.overall_code(), kOk);
  EXPECT_FALSE(both.statuses(0).has_current_limit());
  EXPECT_EQ(both.statuses(1).limit_remaining(), 2u);
  // Alone, the first keeps its 5 per second, untouched by the request above.
  EXPECT_EQ(Remaining("example7", first), 5u);
  EXPECT_EQ(Ask("example7", {first}, 6).overall_code(), kOver);
}

TEST_F(RlsReadmeVectors, Example8And10MetricKeys) {
  Serve({R"(
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: key1
    value: value1
    rate_limit: { unit: minute, requests_per_unit: 20 }
)",
         R"(
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: { unit: minute, requests_per_unit: 60 }
)"});
  Ask("example8", {Desc({{"key1", "unspecified_value"}})});
  Ask("example8", {Desc({{"key1", "value1"}})});
  EXPECT_EQ(stats_.For("example8.key1_unspecified_value").total_hits.load(), 1u);
  EXPECT_EQ(stats_.For("example8.key1_value1").total_hits.load(), 1u);
  Ask("example10", {Desc({{"route", "api"}, {"http_method", "GET"}, {"subject_id", "1"}})});
  EXPECT_EQ(stats_.For("example10.route_api.http_method_GET.subject_id").total_hits.load(), 1u);
}

TEST_F(RlsReadmeVectors, Example9Wildcards) {
  Serve({R"(
domain: example9
descriptors:
  - key: path
    value: /api/*/action
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: route
    value: /api/*/resource/*/action
    rate_limit: { unit: minute, requests_per_unit: 30 }
)"});
  EXPECT_TRUE(
      Ask("example9", {Desc({{"path", "/api/123/action"}})}).statuses(0).has_current_limit());
  EXPECT_FALSE(
      Ask("example9", {Desc({{"path", "/api/123/other"}})}).statuses(0).has_current_limit());
  EXPECT_EQ(Ask("example9", {Desc({{"route", "/api/v1/resource/123/action"}})})
                .statuses(0)
                .current_limit()
                .requests_per_unit(),
            30u);
}

TEST_F(RlsReadmeVectors, Example11ShareThreshold) {
  Serve({R"(
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: { unit: hour, requests_per_unit: 10 }
)"});
  EXPECT_EQ(Ask("example11", {Desc({{"files", "files/a.pdf"}})}, 5).overall_code(), kOk);
  EXPECT_EQ(Ask("example11", {Desc({{"files", "files/b.csv"}})}, 5).overall_code(), kOk);
  EXPECT_EQ(Ask("example11", {Desc({{"files", "files/c.txt"}})}).overall_code(), kOver);
  EXPECT_EQ(
      Ask("example11", {Desc({{"files_no_share", "files_no_share/a.pdf"}})}, 10).overall_code(),
      kOk);
  EXPECT_EQ(Ask("example11", {Desc({{"files_no_share", "files_no_share/b.csv"}})}).overall_code(),
            kOk);
}

// The store out (a real redis-server, killed): each limit's on_error answers within the deadline.
class RlsStoreOutage : public RlsConformance {
 protected:
  void SetUp() override {
    redis_ = testing::RedisServer::Start();
    ASSERT_NE(redis_, nullptr);
    auto backend = OpenStore(redis_->url(), OpenStoreOptions{.timeout = milliseconds(100)});
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(*backend);
    resilient_ = std::make_unique<ResilientStore>(*backend_);
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<Store> backend_;
  std::unique_ptr<ResilientStore> resilient_;
};

constexpr std::string_view kPolicies = R"(
domain: out
descriptors:
  - key: open
    rate_limit: { unit: minute, requests_per_unit: 5, on_error: fail_open }
  - key: closed
    rate_limit: { unit: minute, requests_per_unit: 5, on_error: fail_closed }
  - key: unset
    rate_limit: { unit: minute, requests_per_unit: 5 }
)";

TEST_F(RlsStoreOutage, EachLimitsOnErrorAnswersWithinTheDeadline) {
  Serve({kPolicies}, {}, resilient_.get());
  const Desc open = Desc({{"open", "a"}});
  const Desc closed = Desc({{"closed", "a"}});
  const Desc unset = Desc({{"unset", "a"}});
  EXPECT_EQ(Ask("out", {open}).statuses(0).limit_remaining(), 4u);  // Redis decides while up
  redis_->Kill();
  for (int i = 0; i < 3; ++i) {
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(Ask("out", {open}).overall_code(), kOk);
    EXPECT_EQ(Ask("out", {closed}).overall_code(), kOver);
    EXPECT_EQ(Ask("out", {unset}).overall_code(), kOk);  // the service's default: fail_open
    EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(2));
  }
}

TEST_F(RlsStoreOutage, WithoutADefaultAnUnsetOnErrorIsAnError) {
  Serve({kPolicies}, ServiceOptions{.default_on_error = std::nullopt}, resilient_.get());
  redis_->Kill();
  pb::RateLimitResponse response;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(Call("out", {Desc({{"unset", "a"}})}, 0, response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Ask("out", {Desc({{"closed", "a"}})}).overall_code(), kOver);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(2));
}

// A Redis Cluster (3 masters): one request's descriptors, on keys of several slots and masters,
// are decided all or nothing as on one Redis.
class RlsOnRedisCluster : public RlsConformance {
 protected:
  void SetUp() override {
    cluster_ = testing::RedisCluster::Start(3, 0);
    ASSERT_NE(cluster_, nullptr);
    auto store = OpenStore(cluster_->url(), OpenStoreOptions{.timeout = seconds(2)});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_on_cluster_ = std::move(*store);
  }

  std::unique_ptr<testing::RedisCluster> cluster_;
  std::unique_ptr<Store> store_on_cluster_;
};

// On Redis's clock: a limit per day, where kTwoLimits has one per second, so that the two
// requests fall in one window however slow the machine.
TEST_F(RlsOnRedisCluster, ADescriptorsLimitsAreAllOrNothing) {
  Serve({R"(
domain: multi
descriptors:
  - key: client
    rate_limits:
      - { unit: day, requests_per_unit: 2, name: daily }
      - { unit: hour, requests_per_unit: 3, name: hourly, algorithm: sliding_window }
)"},
        {}, store_on_cluster_.get());
  const Desc client = Desc({{"client", "c"}});
  EXPECT_EQ(Ask("multi", {client}, 2).overall_code(), kOk);
  const auto response = Ask("multi", {client});
  EXPECT_EQ(response.overall_code(), kOver);
  EXPECT_EQ(response.statuses(0).current_limit().name(), "daily");
}

TEST_F(RlsOnRedisCluster, DescriptorsOnSeveralMastersAreChargedAllOrNothing) {
  Serve({R"(
domain: api
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
)"},
        {}, store_on_cluster_.get());
  std::vector<Desc> users;
  for (int i = 0; i < 8; ++i) users.push_back(Desc({{"user", "u" + std::to_string(i)}}));
  auto response = Ask("api", users, 2);
  ASSERT_EQ(response.overall_code(), kOk);
  for (const auto& status : response.statuses()) EXPECT_EQ(status.limit_remaining(), 3u);
  // With a user already at its limit, the request charges none of the others, whatever their
  // master.
  EXPECT_EQ(Ask("api", {Desc({{"user", "spent"}})}, 5).overall_code(), kOk);
  users.push_back(Desc({{"user", "spent"}}));
  EXPECT_EQ(Ask("api", users, 1).overall_code(), kOver);
  users.pop_back();
  for (Desc& user : users) user = user.Hits(0);  // peeks
  response = Ask("api", users);
  for (const auto& status : response.statuses()) EXPECT_EQ(status.limit_remaining(), 3u);
}

}  // namespace
}  // namespace sluice::rls
