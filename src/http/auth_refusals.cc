#include "http/auth_refusals.h"

#include <fmt/format.h>

namespace sluice::http {

std::string AuthRefusals::Exposition() const {
  std::string text =
      "# HELP sluice_auth_refused_total Requests refused before any handler, by reason.\n"
      "# TYPE sluice_auth_refused_total counter\n";
  for (size_t i = 0; i < counts_.size(); ++i) {
    text += fmt::format("sluice_auth_refused_total{{reason=\"{}\"}} {}\n",
                        auth::AuthRefusalName(static_cast<auth::AuthRefusal>(i)),
                        counts_[i].load(std::memory_order_relaxed));
  }
  return text;
}

}  // namespace sluice::http
