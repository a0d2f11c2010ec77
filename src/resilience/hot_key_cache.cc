#include "resilience/hot_key_cache.h"

#include <algorithm>

namespace sluice::resilience {

std::optional<Decision> HotKeyCache::Deny(const CheckRequest& request, Time now) {
  const std::optional<HotKeyEntry> e = map_.Find(request.scope, request.key, now, *request.limit);
  if (!e || e->cost != request.cost) return std::nullopt;
  return Decision{.allowed = false,
                  .limit = request.limit->count(),
                  .remaining = e->remaining,
                  .retry_after = e->denied_until - now,
                  .reset_after = std::max(e->fresh_at, e->denied_until) - now,
                  .replenish_after = std::max(e->replenish_at - now, Duration(0)),
                  .source = DecisionSource::kHotKeyCache};
}

void HotKeyCache::Remember(const CheckRequest& request, Time now, const Decision& denial) {
  map_.Put(request.scope, request.key,
           {.limit = *request.limit,
            .cost = request.cost,
            .denied_until = now + denial.retry_after,
            .fresh_at = now + denial.reset_after,
            .remaining = denial.remaining,
            .replenish_at = now + denial.replenish_after},
           now);
}

void HotKeyCache::Forget(std::string_view scope, std::string_view key) { map_.Erase(scope, key); }

}  // namespace sluice::resilience
