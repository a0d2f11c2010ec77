// The rate-limiting middleware for cpp-httplib servers.
//
//   sluice::middleware::RateLimiter per_ip(limiter, sluice::middleware::ClientIp(), "demo");
//   server.Get("/test", sluice::middleware::Limited(per_ip, [](const auto& req, auto& res) {
//     res.set_content("ok", "text/plain");
//   }));
//
// Or every route at once: sluice::middleware::LimitAllRoutes(server, per_ip).
// Thread safety: as RateLimiter; the RateLimiter must outlive the server.
#pragma once

#include <httplib.h>

#include "sluice/middleware/middleware.h"

namespace sluice::middleware {

class HttplibRequest final : public RequestView {
 public:
  explicit HttplibRequest(const httplib::Request& request) : request_(request) {}
  std::string_view peer_address() const override { return request_.remote_addr; }
  std::string_view path() const override { return request_.path; }
  std::optional<std::string_view> header(std::string_view name) const override {
    auto it = request_.headers.find(std::string(name));  // case-insensitive map
    if (it == request_.headers.end()) return std::nullopt;
    return std::string_view(it->second);
  }

 private:
  const httplib::Request& request_;
};

// Applies the verdict to `response`: the RateLimit headers always, and the 429 when denied.
inline void ApplyVerdict(const Verdict& verdict, httplib::Response& response) {
  for (const auto& [name, value] : verdict.headers) response.set_header(name, value);
  if (verdict.allowed) return;
  response.status = verdict.status;
  response.set_content(verdict.body, "application/json");
}

// `handler`, run only for requests the limiter admits.
inline httplib::Server::Handler Limited(const RateLimiter& limiter,
                                        httplib::Server::Handler handler) {
  return [&limiter, handler = std::move(handler)](const httplib::Request& request,
                                                  httplib::Response& response) {
    const Verdict verdict = limiter.Check(HttplibRequest(request));
    ApplyVerdict(verdict, response);
    if (verdict.allowed) handler(request, response);
  };
}

// Limits every request the server receives, before routing.
inline void LimitAllRoutes(httplib::Server& server, const RateLimiter& limiter) {
  server.set_pre_routing_handler(
      [&limiter](const httplib::Request& request, httplib::Response& response) {
        const Verdict verdict = limiter.Check(HttplibRequest(request));
        ApplyVerdict(verdict, response);
        return verdict.allowed ? httplib::Server::HandlerResponse::Unhandled
                               : httplib::Server::HandlerResponse::Handled;
      });
}

}  // namespace sluice::middleware
