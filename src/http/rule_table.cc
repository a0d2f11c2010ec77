#include "http/rule_table.h"

#include <algorithm>

#include "middleware/rate_limit_headers.h"

namespace sluice::http {

ServedRule::ServedRule(Store& store, const config::Rule& rule, RuleCounters& counters)
    : limiter(store, rule.name, rule.limit, rule.on_error, rule.lease),
      policy_header(middleware::RateLimitPolicyValue(rule.name, rule.limit)),
      counters(&counters),
      waiter_bounds{.max_waiters_per_key = rule.max_waiters_per_key,
                    .max_waiters = rule.max_waiters},
      deny_status(rule.auth.deny_status),
      shadow_mode(rule.shadow_mode) {
  if (!rule.auth.key.empty()) auth_key.emplace(rule.auth);
  if (shadow_mode) counters.shadowed.store(true, std::memory_order_relaxed);
}

std::shared_ptr<const RuleTable> RuleTable::Build(const std::vector<config::Rule>& rules,
                                                  Store& store, Metrics& metrics) {
  std::vector<const config::Rule*> by_name;
  for (const config::Rule& rule : rules) by_name.push_back(&rule);
  std::sort(by_name.begin(), by_name.end(),
            [](const config::Rule* a, const config::Rule* b) { return a->name < b->name; });
  auto table = std::make_shared<RuleTable>();
  table->rules_.reserve(rules.size());
  for (const config::Rule* rule : by_name) {
    table->rules_.emplace_back(store, *rule, metrics.ForRule(rule->name));
  }
  return table;
}

const ServedRule* RuleTable::Find(std::string_view name) const {
  auto it = std::lower_bound(rules_.begin(), rules_.end(), name,
                             [](const ServedRule& r, std::string_view n) { return r.name() < n; });
  return it != rules_.end() && it->name() == name ? &*it : nullptr;
}

}  // namespace sluice::http
