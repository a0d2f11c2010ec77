// The hot-key cache: a key the backend just denied is denied locally, for requests of the same
// cost under the same limit, with the backend's retry_after counted down, until it passes,
// without a round trip. It only ever denies, so it can never admit more than the limit. Only a
// request of the cost denied is served: a smaller one may fit, and a larger one's retry_after is
// later. A reservation (max_delay > 0) neither reads nor fills it: the denials are of requests
// that could not wait, and one that can may be booked.
//
// Thread safety: fully thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "resilience/hot_key_map.h"
#include "sluice/decision.h"
#include "sluice/store.h"

namespace sluice::resilience {

class HotKeyCache {
 public:
  // Remembers at most about `capacity` keys (HotKeyMap).
  explicit HotKeyCache(size_t capacity) : map_(capacity) {}

  // Whether `request` may be denied from the cache, and its denial remembered.
  static bool Serves(const CheckRequest& request) { return request.max_delay.count() == 0; }

  // The denial of `request` at `now`, if the cache holds one for it.
  std::optional<Decision> Deny(const CheckRequest& request, Time now);
  // Remembers the backend's `denial` of `request`, sent at `now` (no later than when the backend
  // decided, so that the denial is never kept past the backend's retry_after).
  void Remember(const CheckRequest& request, Time now, const Decision& denial);
  // Forgets the key's denial (the key was reset).
  void Forget(std::string_view scope, std::string_view key);

 private:
  HotKeyMap map_;
};

}  // namespace sluice::resilience
