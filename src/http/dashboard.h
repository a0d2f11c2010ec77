// The live dashboard of `sluice serve`: GET / (or /ui) is a page that polls GET /metrics and
// GET /v1/top about once a second and shows, per rule, the decisions per second (allowed,
// denied), the acquires waiting, the store's circuit breakers and degraded decisions, and the
// keys denied most. Its files, src/http/dashboard/, are built into the binary (nothing is loaded
// from elsewhere: it works with no network) and served with a Content-Security-Policy that
// allows scripts, styles and requests from this origin only, and no inline script or style.
// Pure functions over constant data.
#pragma once

#include <string_view>

#include "http/exchange.h"

namespace sluice::http {

struct DashboardFile {
  std::string_view content_type;
  std::string_view body;
};

inline constexpr std::string_view kDashboardPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The dashboard's file at `path` (/, /ui, /ui/, /ui/app.js, ...), or null.
const DashboardFile* FindDashboardFile(std::string_view path);

// Answers `file` with its type and the dashboard's headers: the policy above, no sniffing of
// types, no referrer, and revalidation on each load (an upgraded binary serves its own page).
void ServeDashboardFile(const DashboardFile& file, Response& response);

}  // namespace sluice::http
