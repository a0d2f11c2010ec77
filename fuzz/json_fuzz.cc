// Fuzzes the reader of a client's JSON (json/client_json.h) against an independent reading of
// the same bytes (json_oracle.h): what is not one JSON document is refused as malformed, a
// document with a key twice in an object is refused naming it, in a message of bounded size,
// and any other document is read as nlohmann::json reads it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "json/client_json.h"
#include "json_oracle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const sluice::fuzz::JsonShape shape = sluice::fuzz::JsonOracle::Read(text);
  const auto read = sluice::json::ReadClientJson(text);
  if (!shape.valid) {
    if (read.ok() || !read.status().message().starts_with("malformed JSON: ")) std::abort();
  } else if (shape.duplicate_key) {
    if (read.ok() || !read.status().message().starts_with("duplicate key '")) std::abort();
  } else if (!read.ok() || *read != nlohmann::json::parse(text)) {
    std::abort();
  }
  if (!read.ok() && read.status().message().size() > 512) std::abort();
  return 0;
}
