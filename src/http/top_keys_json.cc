#include "http/top_keys_json.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <iterator>
#include <nlohmann/json.hpp>

namespace sluice::http {
namespace {

using nlohmann::json;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: %XX and '+' for a space.
Result<std::string> Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out.push_back(' ');
    } else if (text[i] != '%') {
      out.push_back(text[i]);
    } else {
      const int high = i + 2 < text.size() ? HexValue(text[i + 1]) : -1;
      const int low = high >= 0 ? HexValue(text[i + 2]) : -1;
      if (low < 0) return Status::InvalidArgument("bad percent-encoding in the query");
      out.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    }
  }
  return out;
}

void AppendKey(std::string& out, const std::string& key) {
  out += R"("key":)";
  try {
    out += json(key).dump(-1, ' ', true, json::error_handler_t::strict);
  } catch (const json::type_error&) {  // not UTF-8
    out += json(key).dump(-1, ' ', true, json::error_handler_t::replace);
    out += R"(,"key_hex":")";
    for (const char c : key) fmt::format_to(std::back_inserter(out), "{:02x}", uint8_t(c));
    out += '"';
  }
}

}  // namespace

Result<TopQuery> ParseTopQuery(std::string_view query, size_t max_n) {
  TopQuery parsed;
  bool seen_n = false;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    auto name = Decode(pair.substr(0, eq));
    if (!name.ok()) return name.status();
    auto value = Decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!value.ok()) return value.status();
    if (*name == "rule") {
      if (parsed.rule) return Status::InvalidArgument("'rule' given twice");
      if (value->empty()) return Status::InvalidArgument("'rule' must not be empty");
      parsed.rule = std::move(*value);
    } else if (*name == "n") {
      if (seen_n) return Status::InvalidArgument("'n' given twice");
      seen_n = true;
      size_t n = 0;
      const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
      if (value->empty() || ec != std::errc() || end != value->data() + value->size() || n < 1 ||
          n > max_n) {
        return Status::InvalidArgument(fmt::format("'n' must be an integer from 1 to {}", max_n));
      }
      parsed.n = n;
    } else {
      return Status::InvalidArgument("unknown query field (expected rule, n)");
    }
  }
  return parsed;
}

void AppendTopJson(std::string& out, std::string_view rule, const TopKeysReport& report) {
  const auto window_s = std::chrono::duration_cast<std::chrono::seconds>(report.window).count();
  // A rule name needs no escaping (config::kMaxRuleNameBytes).
  fmt::format_to(std::back_inserter(out),
                 R"({{"rule":"{}","tracked":{},"window_s":{},"denied":{},"max_error":{},"keys":[)",
                 rule, report.tracked, window_s, report.denied, report.max_error);
  for (size_t i = 0; i < report.keys.size(); ++i) {
    const TopKey& key = report.keys[i];
    out += i == 0 ? "{" : ",{";
    AppendKey(out, key.key);
    fmt::format_to(std::back_inserter(out), R"(,"denied":{},"error":{}}})", key.denied, key.error);
  }
  out += "]}";
}

}  // namespace sluice::http
