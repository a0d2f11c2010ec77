#include "http/reset_handler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <utility>

#include "base/hashed_key.h"

namespace sluice::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A path segment's percent-encodings decoded ('+' is itself in a path); nullopt when one is bad.
std::optional<std::string> DecodeSegment(std::string_view segment) {
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out.push_back(segment[i]);
      continue;
    }
    const int high = i + 2 < segment.size() ? HexValue(segment[i + 1]) : -1;
    const int low = high >= 0 ? HexValue(segment[i + 2]) : -1;
    if (low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

}  // namespace

bool ResetHandler::Handle(Call& call, Exchange& exchange) {
  Reset(call.path.substr(kKeysPathPrefix.size()), call, exchange);
  return false;
}

void ResetHandler::Reset(std::string_view rest, Call& call, Exchange& exchange) {
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return answers_.Fail(exchange, 400, "expected DELETE /v1/keys/{rule}/{key}");
  }
  const std::string_view rule_name = rest.substr(0, slash);
  const std::string_view encoded_key = rest.substr(slash + 1);
  const ServedRule* rule = call.rules->Find(rule_name);
  if (rule == nullptr) return answers_.Fail(exchange, 404, "no such rule");
  if (encoded_key.find('/') != std::string_view::npos) {
    return answers_.Fail(exchange, 400, "the key is one path segment: encode '/' as %2F");
  }
  std::optional<std::string> key = DecodeSegment(encoded_key);
  if (!key) return answers_.Fail(exchange, 400, "bad percent-encoding in the key");
  if (key->empty()) return answers_.Fail(exchange, 400, "key must not be empty");
  if (key->size() > kMaxKeyBytes) {
    return answers_.Fail(exchange, 400,
                         fmt::format("key is above the maximum of {} bytes", kMaxKeyBytes));
  }
  if (answers_.Admit(exchange, 1) == 0) return;
  // The rule table keeps `rule` alive until the store answers.
  store_.ResetAsync(
      rule->name(), *key,
      [this, &exchange, rules = std::move(call.rules), rule, who = std::string(call.who),
       hashed = base::HashedKey(*key).value_or("sha256:?")](Status status) {
        if (!status.ok()) {
          spdlog::warn("reset of a key of rule '{}' by {} failed, nothing reset: {}", rule->name(),
                       who, status.message());
          if (status.code() == StatusCode::kInvalidArgument) {
            return answers_.Fail(exchange, 400, status.message());
          }
          return answers_.Undecided(exchange, status);
        }
        metrics_.CountReset(*rule->counters);
        spdlog::info("reset key {} of rule '{}' by {}", hashed, rule->name(), who);
        exchange.response.status = 204;
        exchange.response.body.clear();
        answers_.Finish(exchange);
      });
}

}  // namespace sluice::http
