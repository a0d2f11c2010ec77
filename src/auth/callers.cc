#include "auth/callers.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

namespace sluice::auth {
namespace {

bool AllowsName(const std::optional<std::vector<std::string>>& names, std::string_view name) {
  return !names || std::find(names->begin(), names->end(), name) != names->end();
}

// The token of "Bearer TOKEN", or empty.
std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view token = authorization.substr(kScheme.size() + 1);
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return token;
}

}  // namespace

std::string_view AuthRefusalName(AuthRefusal refusal) {
  switch (refusal) {
    case AuthRefusal::kMissing:
      return "missing";
    case AuthRefusal::kUnknown:
      return "unknown";
    case AuthRefusal::kScope:
      return "scope";
    case AuthRefusal::kRule:
      return "rule";
    case AuthRefusal::kThrottled:
      return "throttled";
  }
  return "unknown";
}

std::shared_ptr<const CallerTable> CallerTable::Build(const config::AuthConfig& auth) {
  auto table = std::make_shared<CallerTable>();
  table->enabled_ = auth.enabled;
  for (const config::CallerConfig& caller : auth.callers) {
    table->entries_.push_back({caller.token_sha256, caller.client_san,
                               Caller{caller.name, caller.scopes, caller.rules, caller.domains}});
  }
  return table;
}

CallerTable::Authentication CallerTable::Identify(
    std::optional<std::string_view> authorization,
    std::optional<std::span<const std::string>> sans) const {
  if (authorization || !sans) return Authenticate(authorization);
  const Caller* caller = ByClientSans(*sans);
  return {caller, caller ? AuthRefusal::kMissing : AuthRefusal::kUnknown};
}

CallerTable::Authentication CallerTable::Authenticate(
    std::optional<std::string_view> authorization) const {
  const std::string_view token = authorization ? BearerToken(*authorization) : std::string_view();
  if (token.empty()) return {nullptr, AuthRefusal::kMissing};
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  if (EVP_Digest(token.data(), token.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    return {nullptr, AuthRefusal::kUnknown};
  }
  // Every caller's digest is compared, the match only remembered: no exit at the first.
  const Caller* found = nullptr;
  for (const Entry& entry : entries_) {
    if (!entry.token_sha256) continue;  // which callers have tokens is no secret
    const bool same = CRYPTO_memcmp(entry.token_sha256->data(), digest.data(), digest.size()) == 0;
    if (same) found = &entry.caller;
  }
  if (found == nullptr) return {nullptr, AuthRefusal::kUnknown};
  return {found, AuthRefusal::kMissing};
}

const Caller* CallerTable::ByClientSans(std::span<const std::string> sans) const {
  const Caller* found = nullptr;
  for (const Entry& entry : entries_) {
    const bool named = std::ranges::any_of(sans, [&](const std::string& san) {
      return std::ranges::find(entry.client_san, san) != entry.client_san.end();
    });
    if (!named) continue;
    if (found != nullptr) return nullptr;
    found = &entry.caller;
  }
  return found;
}

bool CallerTable::AllowsRule(const Caller& caller, std::string_view rule) {
  return AllowsName(caller.rules, rule);
}

bool CallerTable::AllowsDomain(const Caller& caller, std::string_view domain) {
  return AllowsName(caller.domains, domain);
}

}  // namespace sluice::auth
