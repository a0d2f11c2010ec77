// The dashboard's files (this directory), each embedded at build time as a constant by
// cmake/embed_text.cmake (see CMakeLists.txt here): edit the files, not the generated sources.
#pragma once

#include <string_view>

namespace sluice::http::dashboard {

extern const std::string_view kIndexHtml;
extern const std::string_view kAppJs;
extern const std::string_view kModelJs;
extern const std::string_view kPrometheusJs;
extern const std::string_view kStyleCss;

}  // namespace sluice::http::dashboard
