#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <utility>

#include "config/duration.h"
#include "config/store_tls.h"
#include "config/yaml_fields.h"

namespace sluice::config {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxIoThreads = 256;
constexpr int64_t kMaxInstances = 1'000'000;
constexpr int64_t kMaxStoreTimeoutMs = 5'000;

bool IsRuleNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

using Reporter = YamlReporter;

// One mapping's fields, with the reads of this file's own kinds of value.
class Fields : public YamlFields {
 public:
  using YamlFields::YamlFields;

  // A size in bytes: a whole number of bytes, KiB, MiB, GiB or TiB, from kMinMaxMemory to
  // kMaxMaxMemory.
  Result<size_t> ReadMemorySize(const YAML::Node& node, std::string_view field) const {
    static constexpr std::pair<std::string_view, int> kUnits[] = {
        {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
    const std::string text = node.IsScalar() ? node.Scalar() : std::string();
    const auto bad = [&](std::string_view why) {
      return report().At(node, Path(field),
                         "bad size '" + text + "': " + std::string(why) +
                             " (expected bytes, or a whole number of KiB, MiB, GiB or TiB, "
                             "e.g. 256MiB)");
    };
    if (!node.IsScalar()) return bad("not a single value");
    std::string_view digits = text;
    int shift = 0;
    for (const auto& [suffix, bits] : kUnits) {
      if (digits.ends_with(suffix)) {
        digits.remove_suffix(suffix.size());
        shift = bits;
        break;
      }
    }
    uint64_t count = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      return bad("not a whole number with a unit");
    }
    if (count > (kMaxMaxMemory >> shift) || (count << shift) < kMinMaxMemory) {
      return bad("must be between 1MiB and 1TiB");
    }
    return static_cast<size_t>(count << shift);
  }

  // A bound on /v1/acquire waiters: an integer from 1 to kMaxWaitersBound.
  Result<size_t> ReadWaitersBound(const YAML::Node& node, std::string_view field) const {
    auto n = ReadInteger(node, field);
    if (!n.ok()) return n.status();
    if (*n < 1 || static_cast<uint64_t>(*n) > kMaxWaitersBound) {
      return report().At(node, Path(field),
                         "must be between 1 and " + std::to_string(kMaxWaitersBound));
    }
    return static_cast<size_t>(*n);
  }

  // Reads the optional waiter bounds `max_waiters` and `max_waiters_per_key` into `bounds`.
  template <typename Bounds>
  Status ReadWaitersBounds(Bounds& bounds) const {
    for (auto [field, target] : {std::pair{"max_waiters", &bounds.max_waiters},
                                 std::pair{"max_waiters_per_key", &bounds.max_waiters_per_key}}) {
      const YAML::Node node = Get(field);
      if (!node.IsDefined()) continue;
      auto n = ReadWaitersBound(node, field);
      if (!n.ok()) return n.status();
      *target = *n;
    }
    return Status::Ok();
  }
};

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

  const YAML::Node name_node = fields.Get("name");
  auto name = fields.ReadString(name_node, "name");
  if (!name.ok()) return name.status();
  if (name->empty() || name->size() > kMaxRuleNameBytes ||
      !std::all_of(name->begin(), name->end(), IsRuleNameChar)) {
    return report.At(name_node, fields.Path("name"),
                     "'" + *name + "' is not a rule name: 1 to " +
                         std::to_string(kMaxRuleNameBytes) +
                         " characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'");
  }

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
  if (const YAML::Node shadow = fields.Get("shadow_mode"); shadow.IsDefined()) {
    auto value = fields.ReadBool(shadow, "shadow_mode");
    if (!value.ok()) return value.status();
    rule.shadow_mode = *value;
  }
  if (const YAML::Node lease = fields.Get("lease"); lease.IsDefined()) {
    auto terms = ParseLease(report, lease, fields.Path("lease"), rule.limit);
    if (!terms.ok()) return terms.status();
    rule.lease = *terms;
  }
  if (Status s = ParseForwardAuth(report, fields, config, rule.auth); !s.ok()) return s;
  return rule;
}

// forward_auth: {trusted_proxies: [CIDR...], client_prefixes: {ipv4: 32, ipv6: 64}}
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

// A list of names, each [A-Za-z0-9_.:-], at most kMaxRuleNameBytes, none repeated.
Result<std::vector<std::string>> ReadNames(const Reporter& report, const Fields& fields,
                                           const YAML::Node& list, std::string_view field) {
  if (!list.IsSequence()) return report.At(list, fields.Path(field), "expected a list of names");
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = std::string(field) + "[" + std::to_string(i) + "]";
    auto name = fields.ReadString(list[i], item);
    if (!name.ok()) return name.status();
    if (name->empty() || name->size() > kMaxRuleNameBytes ||
        !std::all_of(name->begin(), name->end(), IsRuleNameChar)) {
      return report.At(list[i], fields.Path(item),
                       "expected 1 to " + std::to_string(kMaxRuleNameBytes) +
                           " of [A-Za-z0-9_.:-], got '" + *name + "'");
    }
    if (std::find(names.begin(), names.end(), *name) != names.end()) {
      return report.At(list[i], fields.Path(item), "'" + *name + "' given twice");
    }
    names.push_back(std::move(*name));
  }
  return names;
}

std::optional<uint8_t> HexDigit(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
  return std::nullopt;
}

Result<CallerConfig> ParseCaller(const Reporter& report, const YAML::Node& node, size_t index,
                                 const Config& config) {
  Fields fields(report, node, "server.auth.callers[" + std::to_string(index) + "]");
  if (Status s = fields.Check({"name", "token_sha256", "scopes", "rules", "domains"}); !s.ok()) {
    return s;
  }
  CallerConfig caller;
  for (std::string_view field : {"name", "token_sha256", "scopes"}) {
    if (!fields.Get(field).IsDefined()) return fields.Missing(field);
  }
  const YAML::Node name_node = fields.Get("name");
  auto name = fields.ReadString(name_node, "name");
  if (!name.ok()) return name.status();
  if (name->empty() || name->size() > kMaxRuleNameBytes ||
      !std::all_of(name->begin(), name->end(), IsRuleNameChar)) {
    return report.At(name_node, fields.Path("name"),
                     "expected 1 to " + std::to_string(kMaxRuleNameBytes) +
                         " of [A-Za-z0-9_.:-], got '" + *name + "'");
  }
  caller.name = std::move(*name);

  const YAML::Node hash = fields.Get("token_sha256");
  auto hex = fields.ReadString(hash, "token_sha256");
  if (!hex.ok()) return hex.status();
  if (hex->size() != 64) {
    return report.At(hash, fields.Path("token_sha256"),
                     "expected the 64 hex digits of the token's SHA-256 (never the token), got " +
                         std::to_string(hex->size()) + " characters");
  }
  for (size_t i = 0; i < caller.token_sha256.size(); ++i) {
    const auto high = HexDigit((*hex)[2 * i]);
    const auto low = HexDigit((*hex)[2 * i + 1]);
    if (!high || !low) {
      return report.At(hash, fields.Path("token_sha256"),
                       "expected the 64 hex digits of the token's SHA-256, found a character "
                       "that is not a hex digit");
    }
    caller.token_sha256[i] = static_cast<uint8_t>(*high << 4 | *low);
  }

  const YAML::Node scopes = fields.Get("scopes");
  auto scope_names = ReadNames(report, fields, scopes, "scopes");
  if (!scope_names.ok()) return scope_names.status();
  for (size_t i = 0; i < scope_names->size(); ++i) {
    const std::string& scope = (*scope_names)[i];
    if (scope == "check") {
      caller.scopes |= kScopeCheck;
    } else if (scope == "admin") {
      caller.scopes |= kScopeAdmin;
    } else if (scope == "metrics") {
      caller.scopes |= kScopeMetrics;
    } else {
      return report.At(scopes[i], fields.Path("scopes[" + std::to_string(i) + "]"),
                       "unknown scope '" + scope + "' (expected check, admin or metrics)");
    }
  }
  if (caller.scopes == 0) {
    return report.At(scopes, fields.Path("scopes"), "expected at least one scope");
  }

  if (const YAML::Node rules = fields.Get("rules"); rules.IsDefined()) {
    auto names = ReadNames(report, fields, rules, "rules");
    if (!names.ok()) return names.status();
    for (size_t i = 0; i < names->size(); ++i) {
      const auto& rule = (*names)[i];
      if (std::none_of(config.rules.begin(), config.rules.end(),
                       [&](const Rule& r) { return r.name == rule; })) {
        return report.At(rules[i], fields.Path("rules[" + std::to_string(i) + "]"),
                         "no rule named '" + rule + "'");
      }
    }
    caller.rules = std::move(*names);
  }
  if (const YAML::Node domains = fields.Get("domains"); domains.IsDefined()) {
    if (config.rls.config_dir.empty()) {
      return report.At(domains, fields.Path("domains"),
                       "RLS domains need the rate limit service (rls.config_dir)");
    }
    auto names = ReadNames(report, fields, domains, "domains");
    if (!names.ok()) return names.status();
    caller.domains = std::move(*names);
  }
  return caller;
}

// server.auth: {callers: [{name, token_sha256, scopes, rules, domains}, ...]}
Status ParseAuth(const Reporter& report, const YAML::Node& node, Config& config) {
  Fields fields(report, node, "server.auth");
  if (Status s = fields.Check({"callers"}); !s.ok()) return s;
  const YAML::Node callers = fields.Get("callers");
  if (!callers.IsDefined()) return fields.Missing("callers");
  if (!callers.IsSequence() || callers.size() == 0) {
    return report.At(callers, fields.Path("callers"), "expected a non-empty list of callers");
  }
  AuthConfig& auth = config.server.auth;
  for (size_t i = 0; i < callers.size(); ++i) {
    auto caller = ParseCaller(report, callers[i], i, config);
    if (!caller.ok()) return caller.status();
    const std::string path = "server.auth.callers[" + std::to_string(i) + "]";
    for (const CallerConfig& earlier : auth.callers) {
      if (earlier.name == caller->name) {
        return report.At(callers[i]["name"], path + ".name",
                         "duplicate caller name '" + caller->name + "'");
      }
      if (earlier.token_sha256 == caller->token_sha256) {
        return report.At(callers[i]["token_sha256"], path + ".token_sha256",
                         "the same token as caller '" + earlier.name + "'");
      }
    }
    auth.callers.push_back(std::move(*caller));
  }
  auth.enabled = true;
  return Status::Ok();
}

Result<RlsConfig> ParseRls(const Reporter& report, const YAML::Node& node) {
  Fields fields(report, node, "rls");
  if (Status s = fields.Check({"config_dir", "grpc_listen", "shadow_mode", "quota_mode",
                               "x_ratelimit_headers", "on_error", "watch"});
      !s.ok()) {
    return s;
  }
  RlsConfig rls;
  const YAML::Node dir = fields.Get("config_dir");
  if (!dir.IsDefined()) return fields.Missing("config_dir");
  auto dir_text = fields.ReadString(dir, "config_dir");
  if (!dir_text.ok()) return dir_text.status();
  if (dir_text->empty()) return report.At(dir, fields.Path("config_dir"), "must not be empty");
  rls.config_dir = *dir_text;
  if (const YAML::Node listen = fields.Get("grpc_listen"); listen.IsDefined()) {
    auto text = fields.ReadString(listen, "grpc_listen");
    if (!text.ok()) return text.status();
    auto address = ParseListenAddress(*text);
    if (!address.ok()) {
      return report.At(listen, fields.Path("grpc_listen"), address.status().message());
    }
    rls.grpc_listen = *address;
  }
  for (auto [field, target] :
       {std::pair{"shadow_mode", &rls.shadow_mode}, std::pair{"quota_mode", &rls.quota_mode},
        std::pair{"x_ratelimit_headers", &rls.x_ratelimit_headers},
        std::pair{"watch", &rls.watch}}) {
    const YAML::Node flag = fields.Get(field);
    if (!flag.IsDefined()) continue;
    auto value = fields.ReadBool(flag, field);
    if (!value.ok()) return value.status();
    *target = *value;
  }
  if (const YAML::Node policy_node = fields.Get("on_error"); policy_node.IsDefined()) {
    auto name = fields.ReadString(policy_node, "on_error");
    if (!name.ok()) return name.status();
    if (*name == "error") {
      rls.on_error.reset();
    } else {
      auto policy = ParseFailurePolicy(*name);
      if (!policy.ok()) {
        return report.At(policy_node, fields.Path("on_error"),
                         policy.status().message() + " (or error)");
      }
      rls.on_error = *policy;
    }
  }
  return rls;
}

// A URL's "user:password@": a ':' before its last '@', after the scheme.
bool UrlHoldsPassword(std::string_view url) {
  const auto scheme_end = url.find("://");
  const auto userinfo = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const auto at = url.rfind('@');
  return at != std::string_view::npos && at > userinfo &&
         url.substr(userinfo, at - userinfo).find(':') != std::string_view::npos;
}

// The password in the file at `path`, less one trailing newline; an error never holds it.
Result<std::string> ReadPasswordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot open '" + path + "': " + std::strerror(errno));
  std::string text(kMaxPasswordBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::InvalidArgument("cannot read '" + path + "'");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPasswordBytes) {
    return Status::InvalidArgument("'" + path + "' is larger than " +
                                   std::to_string(kMaxPasswordBytes) + " bytes");
  }
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty()) return Status::InvalidArgument("'" + path + "' is empty");
  if (text.find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument("'" + path + "' holds more than one line");
  }
  return text;
}

// store.key_prefix, and the password from store.password_file or store.password_env.
Status ParseStoreAccess(const Reporter& report, const Fields& fields, StoreConfig& store) {
  if (const YAML::Node prefix = fields.Get("key_prefix"); prefix.IsDefined()) {
    auto text = fields.ReadString(prefix, "key_prefix");
    if (!text.ok()) return text.status();
    const auto bad = [&](std::string_view why) {
      return report.At(prefix, fields.Path("key_prefix"),
                       "bad key prefix '" + *text + "': " + std::string(why));
    };
    if (text->find_first_of("{}") != std::string::npos) {
      return bad(
          "must not contain '{' or '}' (a key's Redis Cluster hash tag is the limiter "
          "key's own)");
    }
    if (text->empty() || text->size() > kMaxKeyPrefixBytes ||
        !std::all_of(text->begin(), text->end(), IsRuleNameChar)) {
      return bad("expected 1 to " + std::to_string(kMaxKeyPrefixBytes) +
                 " letters, digits, '_', '.', ':' or '-' (it is also the Redis ACL's key "
                 "pattern)");
    }
    store.key_prefix = std::move(*text);
  }
  const YAML::Node file = fields.Get("password_file");
  const YAML::Node env = fields.Get("password_env");
  if (file.IsDefined() && env.IsDefined()) {
    return report.At(env, fields.Path("password_env"),
                     "give the password in one place: password_file or password_env");
  }
  if (file.IsDefined()) {
    auto path = fields.ReadString(file, "password_file");
    if (!path.ok()) return path.status();
    auto password = ReadPasswordFile(*path);
    if (!password.ok()) {
      return report.At(file, fields.Path("password_file"), password.status().message());
    }
    store.password = std::move(*password);
  }
  if (env.IsDefined()) {
    auto name = fields.ReadString(env, "password_env");
    if (!name.ok()) return name.status();
    const char* value = name->empty() ? nullptr : std::getenv(name->c_str());
    if (value == nullptr || *value == '\0') {
      return report.At(env, fields.Path("password_env"),
                       "the environment variable '" + *name + "' is not set or is empty");
    }
    store.password = value;
  }
  if (!store.password.empty() && UrlHoldsPassword(store.url)) {
    return report.At(file.IsDefined() ? file : env,
                     fields.Path(file.IsDefined() ? "password_file" : "password_env"),
                     "the store URL holds a password too: give it in one place (the URL may "
                     "name the user alone, redis://user@host:port)");
  }
  return Status::Ok();
}

Result<Config> ParseDocument(const Reporter& report, const YAML::Node& root) {
  Config config;
  Fields top(report, root, "");
  if (Status s = top.Check(
          {"listen", "max_sliding_log_limit", "store", "server", "forward_auth", "rules", "rls"});
      !s.ok()) {
    return s;
  }

  if (const YAML::Node max = top.Get("max_sliding_log_limit"); max.IsDefined()) {
    auto n = top.ReadInteger(max, "max_sliding_log_limit");
    if (!n.ok()) return n.status();
    if (*n < 1 || *n > Limit::kMaxSlidingLogCount) {
      return report.At(max, "max_sliding_log_limit",
                       "must be between 1 and " + std::to_string(Limit::kMaxSlidingLogCount));
    }
    config.max_sliding_log_limit = *n;
  }

  if (const YAML::Node listen = top.Get("listen"); listen.IsDefined()) {
    auto text = top.ReadString(listen, "listen");
    if (!text.ok()) return text.status();
    auto address = ParseListenAddress(*text);
    if (!address.ok()) return report.At(listen, "listen", address.status().message());
    config.listen = *address;
  }

  if (const YAML::Node store = top.Get("store"); store.IsDefined()) {
    Fields fields(report, store, "store");
    if (Status s = fields.Check({"url", "timeout_ms", "instances", "max_memory", "key_prefix",
                                 "password_file", "password_env", "tls"});
        !s.ok()) {
      return s;
    }
    if (const YAML::Node url = fields.Get("url"); url.IsDefined()) {
      auto text = fields.ReadString(url, "url");
      if (!text.ok()) return text.status();
      if (text->empty()) return report.At(url, fields.Path("url"), "must not be empty");
      config.store.url = std::move(*text);
    }
    if (const YAML::Node timeout = fields.Get("timeout_ms"); timeout.IsDefined()) {
      auto ms = fields.ReadInteger(timeout, "timeout_ms");
      if (!ms.ok()) return ms.status();
      // A store call must end well within the 10 s SIGTERM drain, which outlives its answer.
      if (*ms < 1 || *ms > kMaxStoreTimeoutMs) {
        return report.At(timeout, fields.Path("timeout_ms"),
                         "must be between 1 and " + std::to_string(kMaxStoreTimeoutMs));
      }
      config.store.timeout = std::chrono::milliseconds(*ms);
    }
    if (const YAML::Node instances = fields.Get("instances"); instances.IsDefined()) {
      auto n = fields.ReadInteger(instances, "instances");
      if (!n.ok()) return n.status();
      if (*n < 1 || *n > kMaxInstances) {
        return report.At(instances, fields.Path("instances"),
                         "must be between 1 and " + std::to_string(kMaxInstances));
      }
      config.store.instances = *n;
    }
    if (const YAML::Node max = fields.Get("max_memory"); max.IsDefined()) {
      auto bytes = fields.ReadMemorySize(max, "max_memory");
      if (!bytes.ok()) return bytes.status();
      config.store.max_memory = *bytes;
    }
    if (Status s = ParseStoreAccess(report, fields, config.store); !s.ok()) return s;
    if (const YAML::Node tls = fields.Get("tls"); tls.IsDefined()) {
      auto options = ParseStoreTls(report, tls, config.store.url);
      if (!options.ok()) return options.status();
      config.store.tls = std::move(*options);
    }
  }

  if (const YAML::Node server = top.Get("server"); server.IsDefined()) {
    Fields fields(report, server, "server");
    if (Status s = fields.Check({"io_threads", "read_timeout", "idle_timeout", "max_connections",
                                 "max_waiters", "max_waiters_per_key", "expose_keys", "shadow_mode",
                                 "auth"});
        !s.ok()) {
      return s;
    }
    if (const YAML::Node threads = fields.Get("io_threads"); threads.IsDefined()) {
      auto n = fields.ReadInteger(threads, "io_threads");
      if (!n.ok()) return n.status();
      if (*n < 1 || *n > kMaxIoThreads) {
        return report.At(threads, fields.Path("io_threads"),
                         "must be between 1 and " + std::to_string(kMaxIoThreads));
      }
      config.server.io_threads = static_cast<int>(*n);
    }
    for (auto [field, target] : {std::pair{"read_timeout", &config.server.read_timeout},
                                 std::pair{"idle_timeout", &config.server.idle_timeout}}) {
      const YAML::Node node = fields.Get(field);
      if (!node.IsDefined()) continue;
      auto d = fields.ReadDuration(node, field);
      if (!d.ok()) return d.status();
      if (*d < std::chrono::milliseconds(1)) {
        return report.At(node, fields.Path(field), "must be at least 1ms");
      }
      *target = *d;
    }
    if (const YAML::Node max = fields.Get("max_connections"); max.IsDefined()) {
      auto n = fields.ReadInteger(max, "max_connections");
      if (!n.ok()) return n.status();
      if (*n < 1 || static_cast<uint64_t>(*n) > kMaxConnectionsBound) {
        return report.At(max, fields.Path("max_connections"),
                         "must be between 1 and " + std::to_string(kMaxConnectionsBound));
      }
      config.server.max_connections = static_cast<size_t>(*n);
    }
    if (Status s = fields.ReadWaitersBounds(config.server); !s.ok()) return s;
    for (auto [field, target] : {std::pair{"expose_keys", &config.server.expose_keys},
                                 std::pair{"shadow_mode", &config.server.shadow_mode}}) {
      const YAML::Node node = fields.Get(field);
      if (!node.IsDefined()) continue;
      auto value = fields.ReadBool(node, field);
      if (!value.ok()) return value.status();
      *target = *value;
    }
  }

  if (const YAML::Node auth = top.Get("forward_auth"); auth.IsDefined()) {
    if (Status s = ParseForwardAuthSection(report, auth, config.forward_auth); !s.ok()) return s;
  }

  if (const YAML::Node rls = top.Get("rls"); rls.IsDefined()) {
    auto parsed = ParseRls(report, rls);
    if (!parsed.ok()) return parsed.status();
    config.rls = std::move(*parsed);
  }

  // Either the rules or the rls section may be empty when the other is set: a replacement for
  // envoyproxy/ratelimit has no sluice rules to write.
  const bool serves_rls = !config.rls.config_dir.empty();
  const YAML::Node rules = top.Get("rules");
  if (!rules.IsDefined()) {
    if (serves_rls) return config;
    return top.Missing("rules");
  }
  if (!rules.IsSequence() || (rules.size() == 0 && !serves_rls)) {
    return report.At(rules, "rules",
                     serves_rls ? "expected a list of rules"
                                : "expected a non-empty list of rules, or an rls section");
  }
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
  if (const YAML::Node server = top.Get("server"); server.IsDefined()) {
    if (const YAML::Node auth = Fields(report, server, "server").Get("auth"); auth.IsDefined()) {
      if (Status s = ParseAuth(report, auth, config); !s.ok()) return s;
    }
  }
  return config;
}

}  // namespace

std::string ListenAddress::ToString() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("bad listen address '" + std::string(text) +
                                   "': " + std::string(why));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("expected HOST:PORT");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("write an IPv6 address in brackets: [::1]:8080");
  }
  if (host.empty()) return bad("missing host");
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return bad("port must be a number from 0 to 65535");
  }
  return ListenAddress{std::string(host), static_cast<uint16_t>(port)};
}

Result<Config> ParseConfig(std::string_view yaml, std::string_view file_name) {
  const Reporter report(file_name);
  auto root = ParseYaml(yaml, report);
  if (!root.ok()) return root.status();
  if (!root->IsDefined() || root->IsNull()) {
    return report.At(YAML::Mark(), "(top level)", "the file is empty");
  }
  try {
    return ParseDocument(report, *root);
  } catch (const YAML::Exception& e) {
    return report.At(e.mark, "(syntax)", e.msg);
  }
}

Result<Config> LoadConfigFile(const std::string& path) {
  auto text = ReadYamlFile(path, "config file", kMaxConfigBytes);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

}  // namespace sluice::config
