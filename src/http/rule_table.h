// The rules `sluice serve` serves: an immutable table, looked up by name, of each rule's Limiter
// (the one path from a rule to its checks, sluice/limiter.h) and what only the service adds to
// it: its RateLimit-Policy value, its counters, the bounds on its acquires in progress and the
// key and denial status of its forward auth, and its shadow mode.
//
// Thread safety: immutable once built; shared by the requests that use it (a reload builds a
// new table, and requests in flight keep the one they started with).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "http/auth_key.h"
#include "http/metrics.h"
#include "sluice/acquirer.h"
#include "sluice/limiter.h"
#include "sluice/store.h"

namespace sluice::http {

struct ServedRule {
  ServedRule(Store& store, const config::Rule& rule, RuleCounters& counters);

  const std::string& name() const { return limiter.name(); }
  // Whether the rule admits on `decision`: as decided, or always in shadow mode. The one place a
  // rule's shadow mode turns a decision into an answer.
  bool Admits(const Decision& decision) const { return decision.allowed || shadow_mode; }

  Limiter limiter;
  std::string policy_header;
  RuleCounters* counters;
  AcquirerOptions waiter_bounds;    // of /v1/acquire, per key and in all
  std::optional<AuthKey> auth_key;  // of /v1/auth, when the rule has a key
  int deny_status;                  // of /v1/auth
  bool shadow_mode;                 // decided and counted, never denied (config::Rule)
};

class RuleTable {
 public:
  // The rules decided on `store`, each counted in `metrics` (its counters created or found).
  static std::shared_ptr<const RuleTable> Build(const std::vector<config::Rule>& rules,
                                                Store& store, Metrics& metrics);

  const ServedRule* Find(std::string_view name) const;
  size_t size() const { return rules_.size(); }
  const std::vector<ServedRule>& all() const { return rules_; }

 private:
  std::vector<ServedRule> rules_;  // sorted by name
};

}  // namespace sluice::http
