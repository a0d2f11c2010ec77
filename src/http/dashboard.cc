#include "http/dashboard.h"

#include <array>
#include <utility>

#include "http/dashboard/files.h"

namespace sluice::http {
namespace {

constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kJavaScript = "text/javascript; charset=utf-8";
constexpr std::string_view kCss = "text/css; charset=utf-8";

}  // namespace

const DashboardFile* FindDashboardFile(std::string_view path) {
  static const DashboardFile index{kHtml, dashboard::kIndexHtml};
  static const std::array<std::pair<std::string_view, DashboardFile>, 7> files = {{
      {"/", index},
      {"/ui", index},
      {"/ui/", index},
      {"/ui/app.js", {kJavaScript, dashboard::kAppJs}},
      {"/ui/model.js", {kJavaScript, dashboard::kModelJs}},
      {"/ui/prometheus.js", {kJavaScript, dashboard::kPrometheusJs}},
      {"/ui/style.css", {kCss, dashboard::kStyleCss}},
  }};
  for (const auto& [served_at, file] : files) {
    if (served_at == path) return &file;
  }
  return nullptr;
}

void ServeDashboardFile(const DashboardFile& file, Response& response) {
  response.content_type = file.content_type;
  response.body.assign(file.body);
  response.AddHeader("Cache-Control", "no-cache");
  response.AddHeader("Content-Security-Policy", kDashboardPolicy);
  response.AddHeader("X-Content-Type-Options", "nosniff");
  response.AddHeader("Referrer-Policy", "no-referrer");
}

}  // namespace sluice::http
