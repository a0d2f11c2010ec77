// The text exposition format's label values, shared by every /metrics writer (the HTTP service's
// and the rate limit service's). A pure function.
#pragma once

#include <string>
#include <string_view>

namespace sluice::base {

// `text` with backslash, double quote and line feed escaped, as the format asks.
inline std::string PrometheusLabelValue(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace sluice::base
