// envoyproxy/ratelimit's configuration, read as that service reads it, so its files work unchanged
// in sluice. One YAML file per domain:
//
//   domain: messaging
//   descriptors:
//     - key: message_type
//       value: marketing                 # optional; '*' matches any run of characters
//       descriptors:                     # nested: matched against the request's next entry
//         - key: to_number
//           rate_limit: { unit: day, requests_per_unit: 5, name: marketing }
//     - key: to_number
//       rate_limit: { unit: day, requests_per_unit: 100, replaces: [ { name: marketing } ] }
//       shadow_mode: true                # also detailed_metric, value_to_metric, quota_mode,
//                                        # share_threshold (wildcards only), metadata (a mapping)
//
// `rate_limit` takes unit (second, minute, hour, day, week, month, year; any case),
// requests_per_unit (0 denies every hit), name, replaces, or `unlimited: true` without a unit.
// sluice adds, all optional, so a file of that service means what it meant there:
//   algorithm  one of sluice's six; fixed_window (that service's only one) by default
//   burst      for token_bucket, leaky_bucket and gcra
//   on_error   fail_open, fail_closed or local_fallback; unset, the service's default decides
//              (rls/service.h: fail_open unless `rls.on_error: error` reports the failure to the
//              caller, for Envoy's failure_mode_deny to decide, as that service does)
//   rate_limits: [ {...}, {...} ] in place of rate_limit: several limits on one descriptor.
//
// Parsing is strict: an unknown or repeated field, a value of the wrong type, an empty key, a
// duplicate descriptor, a bad unit or a limit Limit::Create rejects is an error naming the file,
// the line and the field ("api.yaml:7: descriptors[1].rate_limit.unit: unknown unit 'fortnight'
// ..."). A directory's files make one Config; two files with one domain are an error, as in that
// service by default. Plain values; parsing is a pure function of the text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rls/unit.h"
#include "sluice/limit.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice::rls {

// One limit of a descriptor.
struct RateLimitSpec {
  std::string name;  // "" when unnamed
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kSecond;
  // What sluice enforces: `requests_per_unit` per unit, with the algorithm and burst given. Absent
  // when requests_per_unit is 0: every hit is over the limit.
  std::optional<Limit> limit;
  // Unset: the service's default (ServiceOptions::default_on_error).
  std::optional<FailurePolicy> on_error;
};

// The rate limit of a configured descriptor: `rate_limit` or `rate_limits`.
struct Rule {
  bool unlimited = false;             // matched descriptors are admitted without counting
  std::vector<RateLimitSpec> limits;  // empty if and only if unlimited
  // The names of limits this rule replaces: a matched limit of one of those names is dropped when
  // this rule matches in the same request.
  std::vector<std::string> replaces;
};

struct Descriptor {
  std::string key;
  std::string value;  // "" matches any value of the key
  // "domain.key_value.key": its place in the tree, which is also its stats name in that service.
  std::string full_key;
  // No rule and no nested descriptors: a match admits without counting.
  std::optional<Rule> rule;
  bool shadow_mode = false;      // the rule's verdict is reported but never denies
  bool quota_mode = false;       // over limit only when every quota_mode descriptor is
  bool detailed_metric = false;  // stats named by the request's values
  bool value_to_metric = false;  // stats name this level by the request's value
  bool share_threshold = false;  // a wildcard's matches share one counter
  nlohmann::json metadata;       // null when absent; returned as dynamic metadata
  std::vector<Descriptor> descriptors;
};

struct DomainConfig {
  std::string domain;  // not empty
  std::string file;    // where it was read, for messages
  std::vector<Descriptor> descriptors;
};

struct Config {
  std::vector<DomainConfig> domains;  // names unique
};

// Descriptor trees deeper than this are refused (Envoy's descriptors have a handful of entries).
inline constexpr size_t kMaxDescriptorDepth = 64;

// One file's text; `file_name` is only used in messages.
Result<DomainConfig> ParseDomainConfig(std::string_view yaml, std::string_view file_name);
// Several domains into one Config; a domain given twice is an error naming both files.
Result<Config> CombineDomains(std::vector<DomainConfig> domains);
// Reads and parses the files, in the order given.
Result<Config> LoadConfigFiles(const std::vector<std::string>& paths);
// Every *.yaml and *.yml file directly in `directory` (symbolic links followed, names starting with
// '.' skipped, as Kubernetes' ConfigMap mounts need), in name order.
Result<Config> LoadConfigDirectory(const std::string& directory);

}  // namespace sluice::rls
