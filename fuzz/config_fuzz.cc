// Fuzzes the YAML config parser: any input is either a valid config (non-empty rules with unique
// names) or an error that names the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto config = sluice::config::ParseConfig(yaml, "fuzz.yaml");
  if (!config.ok()) {
    if (!config.status().message().starts_with("fuzz.yaml")) std::abort();
    return 0;
  }
  std::set<std::string> names;
  for (const auto& rule : config->rules) {
    if (!names.insert(rule.name).second) std::abort();
  }
  if (names.empty()) std::abort();
  return 0;
}
