#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "config/sections.h"
#include "config/tls_identity.h"

namespace sluice::config {
namespace {

std::optional<uint8_t> HexDigit(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
  return std::nullopt;
}

Result<CallerConfig> ParseCaller(const Reporter& report, const YAML::Node& node, size_t index,
                                 const Config& config) {
  Fields fields(report, node, "server.auth.callers[" + std::to_string(index) + "]");
  if (Status s = fields.Check({"name", "token_sha256", "client_san", "scopes", "rules", "domains"});
      !s.ok()) {
    return s;
  }
  CallerConfig caller;
  if (!fields.Has("token_sha256") && !fields.Has("client_san")) {
    return fields.Error("token_sha256", "expected token_sha256, client_san or both");
  }
  if (fields.Has("client_san")) {
    auto sans = ParseClientSans(fields, "client_san");
    if (!sans.ok()) return sans.status();
    caller.client_san = std::move(*sans);
  }
  for (std::string_view field : {"name", "scopes"}) {
    if (!fields.Get(field).IsDefined()) return fields.Missing(field);
  }
  auto name = fields.ReadName(fields.Get("name"), "name", "caller name");
  if (!name.ok()) return name.status();
  caller.name = std::move(*name);

  if (const YAML::Node hash = fields.Get("token_sha256"); hash.IsDefined()) {
    auto hex = fields.ReadString(hash, "token_sha256");
    if (!hex.ok()) return hex.status();
    if (hex->size() != 64) {
      return report.At(hash, fields.Path("token_sha256"),
                       "expected the 64 hex digits of the token's SHA-256 (never the token), got " +
                           std::to_string(hex->size()) + " characters");
    }
    std::array<uint8_t, 32> digest{};
    for (size_t i = 0; i < digest.size(); ++i) {
      const auto high = HexDigit((*hex)[2 * i]);
      const auto low = HexDigit((*hex)[2 * i + 1]);
      if (!high || !low) {
        return report.At(hash, fields.Path("token_sha256"),
                         "expected the 64 hex digits of the token's SHA-256, found a character "
                         "that is not a hex digit");
      }
      digest[i] = static_cast<uint8_t>(*high << 4 | *low);
    }
    caller.token_sha256 = digest;
  }

  const YAML::Node scopes = fields.Get("scopes");
  auto scope_names = fields.ReadNames(scopes, "scopes");
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
    auto names = fields.ReadNames(rules, "rules");
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
    auto names = fields.ReadNames(domains, "domains");
    if (!names.ok()) return names.status();
    caller.domains = std::move(*names);
  }
  return caller;
}

}  // namespace

Status ParseAuthSection(const Reporter& report, const YAML::Node& node, Config& config) {
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
      if (caller->token_sha256 && earlier.token_sha256 == caller->token_sha256) {
        return report.At(callers[i]["token_sha256"], path + ".token_sha256",
                         "the same token as caller '" + earlier.name + "'");
      }
      for (size_t j = 0; j < caller->client_san.size(); ++j) {
        if (std::ranges::find(earlier.client_san, caller->client_san[j]) !=
            earlier.client_san.end()) {
          return report.At(
              callers[i]["client_san"][j], path + ".client_san[" + std::to_string(j) + "]",
              "'" + caller->client_san[j] + "' is already caller '" + earlier.name + "''s");
        }
      }
    }
    auth.callers.push_back(std::move(*caller));
  }
  auth.enabled = true;
  return Status::Ok();
}

}  // namespace sluice::config
