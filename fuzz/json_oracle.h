// What a client's JSON holds, read by nlohmann::json's SAX interface apart from the reader under
// test (json/client_json.h): whether it is one JSON document, and whether an object in it has a
// key twice.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::fuzz {

struct JsonShape {
  bool valid = false;
  bool duplicate_key = false;
};

class JsonOracle final : public nlohmann::json_sax<nlohmann::json> {
 public:
  static JsonShape Read(std::string_view text) {
    JsonOracle oracle;
    const bool valid = nlohmann::json::sax_parse(text, &oracle);
    return {.valid = valid, .duplicate_key = valid && oracle.duplicate_};
  }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  // The DOM reader refuses a number it cannot hold (1e999).
  bool number_float(number_float_t value, const string_t&) override { return std::isfinite(value); }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    objects_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    if (!objects_.back().insert(key).second) duplicate_ = true;
    return true;
  }
  bool end_object() override {
    objects_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  std::vector<std::set<std::string>> objects_;
  bool duplicate_ = false;
};

}  // namespace sluice::fuzz
