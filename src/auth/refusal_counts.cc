#include "auth/refusal_counts.h"

#include <fmt/format.h>

namespace sluice::auth {

std::string RefusalCounts::Exposition(std::string_view name, std::string_view help) const {
  std::string text = fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
  for (size_t i = 0; i < counts_.size(); ++i) {
    text +=
        fmt::format("{}{{reason=\"{}\"}} {}\n", name, AuthRefusalName(static_cast<AuthRefusal>(i)),
                    counts_[i].load(std::memory_order_relaxed));
  }
  return text;
}

}  // namespace sluice::auth
