// `sluice bench --rls HOST:PORT`: `concurrency` chains of ShouldRateLimit calls on one gRPC
// channel (the callback API: each completion starts the chain's next call), as Envoy's many
// workers call one rate limit service.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <latch>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/bench_load.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace sluice::cli {
namespace {

namespace pb = envoy::service::ratelimit::v3;

struct RlsTally {
  std::atomic<uint64_t> ok{0}, over{0}, errors{0};
  Histogram latency;
};

class Load {
 public:
  Load(const BenchFlags& flags, Steady::time_point end)
      : end_(end),
        stub_(pb::RateLimitService::NewStub(
            grpc::CreateChannel(flags.rls, grpc::InsecureChannelCredentials()))),
        running_(flags.concurrency) {
    for (int c = 0; c < flags.concurrency; ++c) {
      auto chain = std::make_unique<Chain>(KeyPicker(flags, c));
      chain->request.set_domain(flags.rls_domain);
      for (int d = 0; d < flags.rls_descriptors; ++d) {
        auto* entry = chain->request.add_descriptors()->add_entries();
        entry->set_key("user");
      }
      chains_.push_back(std::move(chain));
    }
  }

  void Run() {
    for (auto& chain : chains_) Next(*chain);
    running_.wait();
  }

  RlsTally& tally() { return tally_; }

 private:
  struct Chain {
    explicit Chain(KeyPicker picker) : keys(std::move(picker)) {}
    KeyPicker keys;
    std::unique_ptr<grpc::ClientContext> context;
    pb::RateLimitRequest request;
    pb::RateLimitResponse response;
    Steady::time_point start;
  };

  void Next(Chain& chain) {
    if (Steady::now() >= end_) {
      running_.count_down();
      return;
    }
    for (auto& descriptor : *chain.request.mutable_descriptors()) {
      descriptor.mutable_entries(0)->set_value(chain.keys.Next());
    }
    chain.context = std::make_unique<grpc::ClientContext>();
    chain.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    chain.start = Steady::now();
    stub_->async()->ShouldRateLimit(
        chain.context.get(), &chain.request, &chain.response, [this, &chain](grpc::Status status) {
          tally_.latency.Record(
              std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - chain.start)
                  .count());
          if (!status.ok()) {
            tally_.errors.fetch_add(1, std::memory_order_relaxed);
          } else if (chain.response.overall_code() == pb::RateLimitResponse::OK) {
            tally_.ok.fetch_add(1, std::memory_order_relaxed);
          } else {
            tally_.over.fetch_add(1, std::memory_order_relaxed);
          }
          Next(chain);
        });
  }

  const Steady::time_point end_;
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
  std::vector<std::unique_ptr<Chain>> chains_;
  RlsTally tally_;
  std::latch running_;
};

}  // namespace

int RunRlsBench(const BenchFlags& f, Duration duration) {
  const auto start = Steady::now();
  Load load(f, start + duration);
  load.Run();
  const double seconds = std::chrono::duration<double>(Steady::now() - start).count();
  RlsTally& tally = load.tally();
  const uint64_t requests = tally.ok + tally.over + tally.errors;
  const double per_second = static_cast<double>(requests) / seconds;
  const double descriptors_per_second = per_second * f.rls_descriptors;
  const LatencyReport latency(tally.latency);
  if (f.json) {
    nlohmann::json out = {{"rls", f.rls},
                          {"descriptors_per_request", f.rls_descriptors},
                          {"keys", f.keys},
                          {"concurrency", f.concurrency},
                          {"duration_s", seconds},
                          {"requests", requests},
                          {"requests_per_sec", per_second},
                          {"descriptors_per_sec", descriptors_per_second},
                          {"ok", tally.ok.load()},
                          {"over_limit", tally.over.load()},
                          {"errors", tally.errors.load()}};
    latency.AddTo(out);
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "rls %s, %d descriptor(s) per request, %lld keys, %d in flight, %.1f s: %.0f requests/s, "
        "%.0f descriptors/s; %s; ok %llu, over limit %llu, errors %llu\n",
        f.rls.c_str(), f.rls_descriptors, static_cast<long long>(f.keys), f.concurrency, seconds,
        per_second, descriptors_per_second, latency.Text().c_str(),
        static_cast<unsigned long long>(tally.ok.load()),
        static_cast<unsigned long long>(tally.over.load()),
        static_cast<unsigned long long>(tally.errors.load()));
  }
  return tally.errors.load() == requests && requests > 0 ? 1 : 0;
}

}  // namespace sluice::cli
