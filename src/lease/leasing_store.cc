#include "sluice/leasing_store.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "lease/lease_table.h"

namespace sluice {

LeasingStore::LeasingStore(Store& backend, Timers& timers, LeasingStoreOptions options)
    : backend_(backend),
      table_(std::make_shared<lease::LeaseTable>(backend, timers, options.max_keys,
                                                 options.store_timeout)) {}

LeasingStore::~LeasingStore() { table_->Close(); }

LeaseStats LeasingStore::lease_stats() const { return table_->stats(); }

uint32_t LeasingStore::FailureDomain(std::string_view scope, std::string_view key) const {
  return backend_.FailureDomain(scope, key);
}

std::string LeasingStore::FailureDomainName(uint32_t domain) const {
  return backend_.FailureDomainName(domain);
}

void LeasingStore::ProbeAsync(DecisionCallback done) { backend_.ProbeAsync(std::move(done)); }

namespace {

// The results of a batch, some decided from leases and the others by the backend, delivered
// together once the last has arrived.
struct Gathered {
  Gathered(size_t size, BatchCallback done)
      : results(size, Result<Decision>(Status::Internal("not decided"))),
        outstanding(size + 1),  // + 1 for the batch's own pass, ended by Arrive(1)
        done(std::move(done)) {}

  void Arrive(size_t count) {
    if (outstanding.fetch_sub(count, std::memory_order_acq_rel) == count) done(std::move(results));
  }

  std::vector<Result<Decision>> results;
  std::atomic<size_t> outstanding;
  BatchCallback done;
};

}  // namespace

void LeasingStore::DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) {
  if (std::none_of(requests.begin(), requests.end(), Leasable)) {
    return backend_.CheckBatchAsync(requests, std::move(done));
  }
  auto gathered = std::make_shared<Gathered>(requests.size(), std::move(done));
  std::vector<CheckRequest> rest;
  std::vector<size_t> rest_at;
  for (size_t i = 0; i < requests.size(); ++i) {
    DecisionCallback one = [gathered, i](Result<Decision> answer) {
      gathered->results[i] = std::move(answer);
      gathered->Arrive(1);
    };
    if (Leasable(requests[i]) && table_->Decide(requests[i], one)) continue;
    rest.push_back(requests[i]);
    rest_at.push_back(i);
  }
  if (!rest.empty()) {
    const size_t count = rest.size();
    backend_.CheckBatchAsync(rest, [gathered, rest_at = std::move(rest_at), count](auto answers) {
      for (size_t j = 0; j < count; ++j) gathered->results[rest_at[j]] = std::move(answers[j]);
      gathered->Arrive(count);
    });
  }
  gathered->Arrive(1);
}

void LeasingStore::DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) {
  backend_.CheckAllAsync(requests, std::move(done));
}

void LeasingStore::DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) {
  table_->Forget(scope, key);
  backend_.ResetAsync(scope, key, std::move(done));
}

void LeasingStore::DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                                   int64_t units, Time apply_by, StatusCallback done) {
  backend_.GiveBackAsync(scope, limit, key, units, std::move(done), apply_by);
}

}  // namespace sluice
