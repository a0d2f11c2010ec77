// FailingStore: a Store that answers every check, CheckAll and reset with one error, UNAVAILABLE
// unless set otherwise (a store that cannot be reached), for the tests of what the front ends make
// of a store's errors. It implements the Store interface and stands in for no part a user runs.
//
// Thread safety: set `error` before the calls that should see it, not during them.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "sluice/store.h"

namespace sluice::testing {

class FailingStore final : public Store {
 public:
  Status error = Status::Unavailable("connection refused");

 protected:
  void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) override {
    done(std::vector<Result<Decision>>(requests.size(), error));
  }
  void DoResetAsync(std::string_view, std::string_view, StatusCallback done) override {
    done(error);
  }
  void DoCheckAllAsync(std::span<const CheckRequest>, AllCallback done) override { done(error); }
};

}  // namespace sluice::testing
