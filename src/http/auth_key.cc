#include "http/auth_key.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <string_view>
#include <utility>

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

// The original request's path, without its query string.
mw::KeyExtractor OriginalPath() {
  return [uri = FirstOf({mw::Header("X-Original-URI"), mw::Header("X-Forwarded-Uri")})](
             const mw::RequestView& r) -> std::optional<std::string> {
    auto value = uri(r);
    if (value) value->resize(std::min(value->size(), value->find('?')));
    return value;
  };
}

// ClientIp's walk, only for a request that has an X-Forwarded-For: without one it would key the
// proxy itself.
mw::KeyExtractor ForwardedFor(const config::ForwardAuth& auth) {
  return [has = mw::Header("X-Forwarded-For"),
          walk = mw::ClientIp(auth.trusted_proxies, auth.client_prefixes)](
             const mw::RequestView& r) -> std::optional<std::string> {
    if (!has(r)) return std::nullopt;
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
        parts_.push_back({"X-Original-URI or X-Forwarded-Uri header", OriginalPath()});
        break;
    }
    extractors.push_back(parts_.back().extract);
  }
  if (parts_.size() > 1) composed_ = mw::Compose(std::move(extractors));
}

Result<std::string> AuthKey::Of(const mw::RequestView& request) const {
  if (needs_trusted_peer_ && !trusted_.Contains(request.peer_address())) {
    return Status::InvalidArgument(
        "the request came from " + std::string(request.peer_address()) +
        ", which is not a trusted proxy (forward_auth.trusted_proxies): its address headers "
        "cannot be believed");
  }
  for (const Part& part : parts_) {
    std::optional<std::string> value = part.extract(request);
    if (!value) return Status::InvalidArgument("the request has no " + part.what);
    if (!composed_) return mw::StoredKey(std::move(*value));
  }
  return mw::StoredKey(*composed_(request));
}

}  // namespace sluice::http
