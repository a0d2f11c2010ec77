#include "json/client_json.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace sluice::json {
namespace {

using nlohmann::json;

std::string Quoted(std::string_view key) {
  if (key.size() <= kMaxQuotedKeyBytes) return "'" + std::string(key) + "'";
  return "'" + std::string(key.substr(0, kMaxQuotedKeyBytes)) + "...' (" +
         std::to_string(key.size()) + " bytes)";
}

// The parser's message quotes the token it stopped at, which may be most of the body.
std::string Shortened(std::string_view message) {
  if (message.size() <= kMaxParseErrorBytes) return std::string(message);
  return std::string(message.substr(0, kMaxParseErrorBytes)) + "...";
}

}  // namespace

Result<nlohmann::json> ReadClientJson(std::string_view text) {
  // The keys of each object being read, innermost last; sorted when the object ends, so that an
  // object of many keys costs O(n log n).
  std::vector<std::vector<std::string>> keys;
  std::optional<std::string> duplicate;
  const json::parser_callback_t watch = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::key:
        keys.back().push_back(parsed.get_ref<const std::string&>());
        break;
      case json::parse_event_t::object_end: {
        std::vector<std::string>& object = keys.back();
        std::sort(object.begin(), object.end());
        if (const auto twice = std::adjacent_find(object.begin(), object.end());
            twice != object.end() && !duplicate) {
          duplicate = std::move(*twice);
        }
        keys.pop_back();
        break;
      }
      default:
        break;
    }
    return true;
  };
  json document;
  try {
    document = json::parse(text, watch);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    return Status::InvalidArgument("malformed JSON: " + Shortened(e.what()));
  }
  if (duplicate) {
    return Status::InvalidArgument("duplicate key " + Quoted(*duplicate) +
                                   ": each key may appear once in an object");
  }
  return document;
}

}  // namespace sluice::json
