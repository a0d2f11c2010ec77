// The rate-limiting middleware for cpp-httplib servers.
//
//   auto per_ip = sluice::middleware::RateLimiter::Create(limiter, sluice::middleware::ClientIp(),
//                                                        "demo").value();  // or check ok()
//   server.Get("/test", sluice::middleware::Limited(per_ip, [](const auto& req, auto& res) {
//     res.set_content("ok", "text/plain");
//   }));
//
// Or every route at once: sluice::middleware::LimitAllRoutes(server, per_ip). A refused request
// is answered with the verdict's status (429, or 503/500 when the limiter could not decide).
//
// Shaping (RateLimiterOptions::delay): cpp-httplib handlers are synchronous, so a delayed request
// is held by sleeping on its handler thread until its slot. Each held request occupies one thread
// of the server's pool (CPPHTTPLIB_THREAD_POOL_COUNT, or the task queue given to the server):
// keep `delay` below the pool size, or requests for other keys queue behind the held ones.
// Thread safety: as RateLimiter; the RateLimiter must outlive the server.
#pragma once

#include <httplib.h>

#include <thread>

#include "sluice/middleware/middleware.h"

namespace sluice::middleware {

class HttplibRequest final : public RequestView {
 public:
  explicit HttplibRequest(const httplib::Request& request) : request_(request) {}
  std::string_view peer_address() const override { return request_.remote_addr; }
  // request.path is decoded: the target keeps the path as the client sent it.
  std::string_view path() const override {
    const std::string_view target = request_.target;
    return target.substr(0, target.find('?'));
  }
  void ForEachHeaderValue(std::string_view name,
                          const std::function<void(std::string_view)>& visit) const override {
    // A case-insensitive multimap, one entry per line in the order received.
    const auto [first, last] = request_.headers.equal_range(std::string(name));
    for (auto it = first; it != last; ++it) visit(it->second);
  }

 private:
  const httplib::Request& request_;
};

// Applies the verdict to `response`: its headers always, and its refusal when not allowed.
inline void ApplyVerdict(const Verdict& verdict, httplib::Response& response) {
  for (const auto& [name, value] : verdict.headers) response.set_header(name, value);
  if (verdict.allowed) return;
  response.status = verdict.status;
  response.set_content(verdict.body, "application/json");
}

// Holds an admitted request until its slot (shaping), blocking the handler thread.
inline void WaitForSlot(const Verdict& verdict) {
  if (verdict.delay.count() > 0) std::this_thread::sleep_for(verdict.delay);
}

// `handler`, run only for requests the limiter admits, once their slot has come.
inline httplib::Server::Handler Limited(const RateLimiter& limiter,
                                        httplib::Server::Handler handler) {
  return [&limiter, handler = std::move(handler)](const httplib::Request& request,
                                                  httplib::Response& response) {
    const Verdict verdict = limiter.Check(HttplibRequest(request));
    ApplyVerdict(verdict, response);
    if (!verdict.allowed) return;
    WaitForSlot(verdict);
    handler(request, response);
  };
}

// Limits every request the server receives, before routing.
inline void LimitAllRoutes(httplib::Server& server, const RateLimiter& limiter) {
  server.set_pre_routing_handler(
      [&limiter](const httplib::Request& request, httplib::Response& response) {
        const Verdict verdict = limiter.Check(HttplibRequest(request));
        ApplyVerdict(verdict, response);
        if (!verdict.allowed) return httplib::Server::HandlerResponse::Handled;
        WaitForSlot(verdict);
        return httplib::Server::HandlerResponse::Unhandled;
      });
}

}  // namespace sluice::middleware
