#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <utility>

#include "config/sections.h"

namespace sluice::config {
namespace {

// RFC 9110 section 5.1: a field name is a token.
bool IsHeaderName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// One part of a rule's `key`: forwarded_for, real_ip, method, uri, or {header: NAME}.
Result<KeyPart> ParseKeyPart(const Reporter& report, const YAML::Node& node,
                             const std::string& path) {
  using Source = KeyPart::Source;
  if (node.IsScalar()) {
    for (auto [name, source] :
         {std::pair{"forwarded_for", Source::kForwardedFor}, std::pair{"real_ip", Source::kRealIp},
          std::pair{"method", Source::kMethod}, std::pair{"uri", Source::kUri}}) {
      if (node.Scalar() == name) return KeyPart{.source = source, .header = {}};
    }
  } else if (node.IsMap()) {
    Fields fields(report, node, path);
    if (Status s = fields.Check({"header"}); !s.ok()) return s;
    const YAML::Node header = fields.Get("header");
    if (!header.IsDefined()) return fields.Missing("header");
    auto name = fields.ReadString(header, "header");
    if (!name.ok()) return name.status();
    if (!IsHeaderName(*name)) {
      return report.At(header, fields.Path("header"), "'" + *name + "' is not a header name");
    }
    return KeyPart{.source = Source::kHeader, .header = std::move(*name)};
  }
  return report.At(node, path,
                   "expected forwarded_for, real_ip, method, uri or {header: NAME}, got '" +
                       (node.IsScalar() ? node.Scalar() : std::string("a list")) + "'");
}

// A rule's forward auth: `key` (a part, or a list of parts) and `deny_status`.
Status ParseForwardAuth(const Reporter& report, const Fields& fields, const Config& config,
                        ForwardAuth& auth) {
  auth.trusted_proxies = config.forward_auth.trusted_proxies;
  auth.client_prefixes = config.forward_auth.client_prefixes;
  const YAML::Node key = fields.Get("key");
  if (key.IsDefined()) {
    const bool list = key.IsSequence();
    if (list && key.size() == 0) return report.At(key, fields.Path("key"), "must not be empty");
    for (size_t i = 0; i < (list ? key.size() : 1); ++i) {
      const std::string path = fields.Path("key") + (list ? "[" + std::to_string(i) + "]" : "");
      auto part = ParseKeyPart(report, list ? key[i] : key, path);
      if (!part.ok()) return part.status();
      const bool address = part->source == KeyPart::Source::kForwardedFor ||
                           part->source == KeyPart::Source::kRealIp;
      if (address && !config.forward_auth.any_trusted) {
        return report.At(list ? key[i] : key, path,
                         "a client address needs forward_auth.trusted_proxies: the addresses "
                         "of the proxies whose headers are believed");
      }
      auth.key.push_back(std::move(*part));
    }
  }
  if (const YAML::Node status = fields.Get("deny_status"); status.IsDefined()) {
    auto n = fields.ReadInteger(status, "deny_status");
    if (!n.ok()) return n.status();
    if (*n != 429 && *n != 403) {
      return report.At(status, fields.Path("deny_status"), "must be 429 or 403");
    }
    if (auth.key.empty()) {
      return report.At(status, fields.Path("deny_status"),
                       "is for forward auth (/v1/auth): give the rule a key");
    }
    auth.deny_status = static_cast<int>(*n);
  }
  return Status::Ok();
}

// A rule's `lease: {units: N, lifetime: 100ms}`, valid for its limit (ValidateLeaseTerms).
Result<LeaseTerms> ParseLease(const Reporter& report, const YAML::Node& node,
                              const std::string& path, const Limit& limit) {
  Fields fields(report, node, path);
  if (Status s = fields.Check({"units", "lifetime"}); !s.ok()) return s;
  const YAML::Node units_node = fields.Get("units");
  if (!units_node.IsDefined()) return fields.Missing("units");
  auto units = fields.ReadInteger(units_node, "units");
  if (!units.ok()) return units.status();
  // Units 0 turn leases off; a rule does that by giving no lease.
  if (*units < 1) {
    return report.At(units_node, fields.Path("units"),
                     "must be at least 1, got " + std::to_string(*units));
  }
  LeaseTerms terms{.units = *units, .lifetime = kDefaultLeaseLifetime};
  const YAML::Node lifetime_node = fields.Get("lifetime");
  if (lifetime_node.IsDefined()) {
    auto lifetime = fields.ReadDuration(lifetime_node, "lifetime");
    if (!lifetime.ok()) return lifetime.status();
    terms.lifetime = *lifetime;
  }
  if (Status s = ValidateLeaseTerms(limit, terms); !s.ok()) {
    // Point at the field the library's complaint is about.
    const std::string& message = s.message();
    if (message.starts_with("lease units")) {
      return report.At(units_node, fields.Path("units"), message);
    }
    if (message.starts_with("lease lifetime")) {  // the default is valid: a lifetime was given
      return report.At(lifetime_node, fields.Path("lifetime"), message);
    }
    return report.At(node, path, message);
  }
  return terms;
}

Result<Rule> ParseRule(const Reporter& report, const YAML::Node& node, size_t index,
                       const Config& config) {
  const ServerConfig& server = config.server;
  const std::string path = "rules[" + std::to_string(index) + "]";
  Fields fields(report, node, path);
  if (Status s =
          fields.Check({"name", "algorithm", "limit", "period", "burst", "on_error", "max_waiters",
                        "max_waiters_per_key", "key", "deny_status", "shadow_mode", "lease"});
      !s.ok()) {
    return s;
  }
  for (std::string_view required : {"name", "algorithm", "limit", "period"}) {
    if (!fields.Get(required).IsDefined()) return fields.Missing(required);
  }

  auto name = fields.ReadName(fields.Get("name"), "name", "rule name");
  if (!name.ok()) return name.status();

  const YAML::Node algorithm_node = fields.Get("algorithm");
  auto algorithm_name = fields.ReadString(algorithm_node, "algorithm");
  if (!algorithm_name.ok()) return algorithm_name.status();
  auto algorithm = ParseAlgorithm(*algorithm_name);
  if (!algorithm.ok()) {
    return report.At(algorithm_node, fields.Path("algorithm"), algorithm.status().message());
  }

  const YAML::Node limit_node = fields.Get("limit");
  auto count = fields.ReadInteger(limit_node, "limit");
  if (!count.ok()) return count.status();
  const YAML::Node period_node = fields.Get("period");
  auto period = fields.ReadDuration(period_node, "period");
  if (!period.ok()) return period.status();
  const YAML::Node burst_node = fields.Get("burst");
  std::optional<int64_t> burst;
  if (burst_node.IsDefined()) {
    auto parsed = fields.ReadInteger(burst_node, "burst");
    if (!parsed.ok()) return parsed.status();
    burst = *parsed;
  }

  auto limit = Limit::Create(*algorithm, *count, *period, burst);
  if (!limit.ok()) {
    // Point at the field the library's complaint is about.
    const Status status = limit.status();
    const std::string& message = status.message();
    if (burst && message.find("burst") != std::string::npos) {
      return report.At(burst_node, fields.Path("burst"), message);
    }
    if (message.starts_with("period")) {
      return report.At(period_node, fields.Path("period"), message);
    }
    return report.At(limit_node, fields.Path("limit"), message);
  }
  if (limit->algorithm() == Algorithm::kSlidingLog &&
      limit->count() > config.max_sliding_log_limit) {
    return report.At(limit_node, fields.Path("limit"),
                     "sliding_log keeps one entry per admitted request (about 100 bytes each in "
                     "Redis); limit " +
                         std::to_string(limit->count()) + " is above max_sliding_log_limit " +
                         std::to_string(config.max_sliding_log_limit) +
                         ": use sliding_window, or raise max_sliding_log_limit (at most " +
                         std::to_string(Limit::kMaxSlidingLogCount) + ")");
  }
  FailurePolicy on_error = FailurePolicy::kFailOpen;
  if (const YAML::Node policy_node = fields.Get("on_error"); policy_node.IsDefined()) {
    auto policy_name = fields.ReadString(policy_node, "on_error");
    if (!policy_name.ok()) return policy_name.status();
    auto policy = ParseFailurePolicy(*policy_name);
    if (!policy.ok()) {
      return report.At(policy_node, fields.Path("on_error"), policy.status().message());
    }
    on_error = *policy;
  }
  Rule rule{.name = std::move(*name),
            .limit = *limit,
            .on_error = on_error,
            .max_waiters_per_key = server.max_waiters_per_key,
            .max_waiters = server.max_waiters,
            .shadow_mode = server.shadow_mode,
            .auth = {},
            .lease = {}};
  if (Status s = fields.ReadWaitersBounds(rule); !s.ok()) return s;
  if (Status s = fields.ReadOptionalBool("shadow_mode", rule.shadow_mode); !s.ok()) return s;
  if (const YAML::Node lease = fields.Get("lease"); lease.IsDefined()) {
    auto terms = ParseLease(report, lease, fields.Path("lease"), rule.limit);
    if (!terms.ok()) return terms.status();
    rule.lease = *terms;
  }
  if (Status s = ParseForwardAuth(report, fields, config, rule.auth); !s.ok()) return s;
  return rule;
}

}  // namespace

Status ParseRulesSection(const Reporter& report, const YAML::Node& rules, Config& config) {
  for (size_t i = 0; i < rules.size(); ++i) {
    auto rule = ParseRule(report, rules[i], i, config);
    if (!rule.ok()) return rule.status();
    for (const Rule& earlier : config.rules) {
      if (earlier.name == rule->name) {
        return report.At(rules[i]["name"], "rules[" + std::to_string(i) + "].name",
                         "duplicate rule name '" + rule->name + "'");
      }
    }
    config.rules.push_back(std::move(*rule));
  }
  return Status::Ok();
}

Status ParseForwardAuthSection(const Reporter& report, const YAML::Node& node,
                               ForwardAuthConfig& auth) {
  Fields fields(report, node, "forward_auth");
  if (Status s = fields.Check({"trusted_proxies", "client_prefixes"}); !s.ok()) return s;
  if (const YAML::Node list = fields.Get("trusted_proxies"); list.IsDefined()) {
    if (!list.IsSequence()) {
      return report.At(list, fields.Path("trusted_proxies"), "expected a list of addresses");
    }
    std::vector<std::string> cidrs;
    for (size_t i = 0; i < list.size(); ++i) {
      auto cidr = fields.ReadString(list[i], "trusted_proxies[" + std::to_string(i) + "]");
      if (!cidr.ok()) return cidr.status();
      cidrs.push_back(std::move(*cidr));
    }
    auto trusted = middleware::TrustedProxies::Parse(cidrs);
    if (!trusted.ok()) {
      return report.At(list, fields.Path("trusted_proxies"), trusted.status().message());
    }
    auth.trusted_proxies = *trusted;
    auth.any_trusted = !cidrs.empty();
  }
  if (const YAML::Node prefixes = fields.Get("client_prefixes"); prefixes.IsDefined()) {
    Fields bits(report, prefixes, fields.Path("client_prefixes"));
    if (Status s = bits.Check({"ipv4", "ipv6"}); !s.ok()) return s;
    int64_t ipv4 = auth.client_prefixes.ipv4();
    int64_t ipv6 = auth.client_prefixes.ipv6();
    for (auto [field, target] : {std::pair{"ipv4", &ipv4}, std::pair{"ipv6", &ipv6}}) {
      const YAML::Node value = bits.Get(field);
      if (!value.IsDefined()) continue;
      auto n = bits.ReadInteger(value, field);
      if (!n.ok()) return n.status();
      *target = *n;
    }
    auto created =
        middleware::ClientPrefixes::Create(static_cast<int>(ipv4), static_cast<int>(ipv6));
    if (!created.ok()) {
      return report.At(prefixes, fields.Path("client_prefixes"), created.status().message());
    }
    auth.client_prefixes = *created;
  }
  return Status::Ok();
}

}  // namespace sluice::config
