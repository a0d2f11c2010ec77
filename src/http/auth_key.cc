#include "http/auth_key.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <string_view>
#include <utility>

#include "middleware/forwarded_for.h"
#include "middleware/request_path.h"

namespace sluice::http {
namespace {

namespace mw = middleware;
using Source = config::KeyPart::Source;

// The first of `extractors` that finds something.
mw::KeyExtractor FirstOf(std::vector<mw::KeyExtractor> extractors) {
  return [extractors = std::move(extractors)](const mw::RequestView& r) {
    for (const mw::KeyExtractor& extract : extractors) {
      if (auto key = extract(r)) return key;
    }
    return std::optional<std::string>();
  };
}

// The original request's target, as the proxy sent it.
mw::KeyExtractor OriginalUri() {
  return FirstOf({mw::Header("X-Original-URI"), mw::Header("X-Forwarded-Uri")});
}

// The original request's path in its canonical form (NormalPath); nullopt when there is none, or
// when it is malformed (MalformedUri).
mw::KeyExtractor OriginalPath() {
  return [uri = OriginalUri()](const mw::RequestView& r) -> std::optional<std::string> {
    const auto target = uri(r);
    if (!target) return std::nullopt;
    Result<std::string> path = mw::NormalPath(*target);
    if (!path.ok()) return std::nullopt;
    return std::move(*path);
  };
}

// Why the original request's target makes no path, when it does not.
std::function<std::optional<std::string>(const mw::RequestView&)> MalformedUri() {
  return [uri = OriginalUri()](const mw::RequestView& r) -> std::optional<std::string> {
    const auto target = uri(r);
    if (!target) return std::nullopt;
    const Result<std::string> path = mw::NormalPath(*target);
    if (path.ok()) return std::nullopt;
    return path.status().message();
  };
}

// ClientIp's walk, only for a request whose X-Forwarded-For has an entry: without one (no header,
// or only empty entries such as ",") it would key the proxy itself, one key for every client.
mw::KeyExtractor ForwardedFor(const config::ForwardAuth& auth) {
  return [walk = mw::ClientIp(auth.trusted_proxies, auth.client_prefixes)](
             const mw::RequestView& r) -> std::optional<std::string> {
    if (mw::ForwardedForEntries(r).empty()) return std::nullopt;
    return walk(r);
  };
}

mw::KeyExtractor RealIp(const config::ForwardAuth& auth) {
  return [header = mw::Header("X-Real-IP"),
          prefixes = auth.client_prefixes](const mw::RequestView& r) -> std::optional<std::string> {
    const auto address = header(r);
    if (!address) return std::nullopt;
    return prefixes.KeyOf(*address);
  };
}

}  // namespace

AuthKey::AuthKey(const config::ForwardAuth& auth) : trusted_(auth.trusted_proxies) {
  assert(!auth.key.empty());
  std::vector<mw::KeyExtractor> extractors;
  for (const config::KeyPart& part : auth.key) {
    switch (part.source) {
      case Source::kForwardedFor:
        parts_.push_back({"X-Forwarded-For address", ForwardedFor(auth)});
        needs_trusted_peer_ = true;
        break;
      case Source::kRealIp:
        parts_.push_back({"X-Real-IP address", RealIp(auth)});
        needs_trusted_peer_ = true;
        break;
      case Source::kHeader:
        parts_.push_back({part.header + " header", mw::Header(part.header)});
        break;
      case Source::kMethod:
        parts_.push_back(
            {"X-Forwarded-Method or X-Original-Method header",
             FirstOf({mw::Header("X-Forwarded-Method"), mw::Header("X-Original-Method")})});
        break;
      case Source::kUri:
        parts_.push_back(
            {"X-Original-URI or X-Forwarded-Uri header", OriginalPath(), MalformedUri()});
        break;
    }
    extractors.push_back(parts_.back().extract);
  }
  if (parts_.size() > 1) composed_ = mw::Compose(std::move(extractors));
}

std::variant<std::string, AuthKey::NoKey> AuthKey::Of(const mw::RequestView& request) const {
  if (needs_trusted_peer_ && !trusted_.Contains(request.peer_address())) {
    return NoKey{401, "the request came from " + std::string(request.peer_address()) +
                          ", which is not a trusted proxy (forward_auth.trusted_proxies): its "
                          "address headers cannot be believed"};
  }
  for (const Part& part : parts_) {
    std::optional<std::string> value = part.extract(request);
    if (!value) {
      if (part.malformed) {
        if (auto why = part.malformed(request)) return NoKey{400, std::move(*why)};
      }
      return NoKey{401, "the request has no " + part.what};
    }
    if (!composed_) return Stored(std::move(*value));
  }
  return Stored(*composed_(request));
}

std::variant<std::string, AuthKey::NoKey> AuthKey::Stored(std::string key) {
  Result<std::string> stored = mw::StoredKey(std::move(key));
  if (!stored.ok()) return NoKey{500, stored.status().message()};
  return std::move(*stored);
}

}  // namespace sluice::http
