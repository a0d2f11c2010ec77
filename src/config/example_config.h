// The example rule set, examples/sluice.yaml, embedded in the build (cmake/embed_text.cmake):
// what `sluice serve` serves when no --config is given, wherever it is installed or run from.
#pragma once

#include <string_view>

namespace sluice::config {

// The text of examples/sluice.yaml when the binary was built.
extern const std::string_view kExampleConfig;
// Its name in error messages and logs.
inline constexpr std::string_view kExampleConfigName = "examples/sluice.yaml (built in)";

}  // namespace sluice::config
