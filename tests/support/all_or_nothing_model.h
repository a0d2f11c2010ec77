// AllOrNothingModel: the reference for Store::CheckAll, written apart from the stores: each
// request decided by core::Decide on a copy of its (scope, key)'s state, the copies kept only if
// every request admits; otherwise those that would have admitted report what a peek sees, as
// refused with retry_after 0. Not thread-safe: one per test.
#pragma once

#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms.h"
#include "sluice/store.h"

namespace sluice::testing {

class AllOrNothingModel {
 public:
  std::vector<Decision> CheckAll(std::span<const CheckRequest> requests, int64_t now) {
    std::vector<core::State> next;
    std::vector<Decision> decisions;
    bool all = true;
    for (const auto& r : requests) {
      next.push_back(StateOf(r, now));
      decisions.push_back(core::Decide(*r.limit, next.back(), now, r.cost));
      all = all && decisions.back().allowed;
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      if (all) {
        states_[Key(requests[i])] = next[i];
      } else if (decisions[i].allowed) {
        core::State peek = StateOf(requests[i], now);
        decisions[i] = core::Decide(*requests[i].limit, peek, now, 0);
        decisions[i].allowed = false;
        decisions[i].retry_after = Duration(0);
      }
    }
    return decisions;
  }

 private:
  core::State StateOf(const CheckRequest& r, int64_t now) {
    auto it = states_.find(Key(r));
    return it != states_.end() ? it->second : core::FreshState(*r.limit, now);
  }
  static std::pair<std::string, std::string> Key(const CheckRequest& r) {
    return {std::string(r.scope), std::string(r.key)};
  }
  std::map<std::pair<std::string, std::string>, core::State> states_;
};

}  // namespace sluice::testing
