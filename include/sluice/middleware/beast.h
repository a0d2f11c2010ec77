// The rate-limiting middleware for Boost.Beast servers. In your request handler:
//
//   const auto verdict = sluice::middleware::CheckBeast(per_ip, request, socket.remote_endpoint());
//   if (!verdict.allowed) return send(sluice::middleware::Rejection(verdict, request));
//   http::response<http::string_body> response = handle(request);
//   sluice::middleware::AddHeaders(verdict, response);
//
// For an asynchronous store, RateLimiter::CheckAsync with a BeastRequest view does the same
// without blocking the I/O thread. With shaping (RateLimiterOptions::delay), hold the admitted
// request until its slot without blocking either:
//
//   sluice::middleware::AfterDelay(verdict, socket.get_executor(), [&] { handle_and_send(); });
//
// Thread safety: as RateLimiter.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <string>
#include <utility>

#include "sluice/middleware/middleware.h"

namespace sluice::middleware {

template <class Body, class Fields>
class BeastRequest final : public RequestView {
 public:
  BeastRequest(const boost::beast::http::request<Body, Fields>& request,
               const boost::asio::ip::tcp::endpoint& peer)
      : request_(request), peer_(peer.address().to_string()) {}

  std::string_view peer_address() const override { return peer_; }
  std::string_view path() const override {
    const std::string_view target(request_.target().data(), request_.target().size());
    return target.substr(0, target.find('?'));
  }
  std::optional<std::string_view> header(std::string_view name) const override {
    auto it = request_.find(boost::beast::string_view(name.data(), name.size()));
    if (it == request_.end()) return std::nullopt;
    return std::string_view(it->value().data(), it->value().size());
  }

 private:
  const boost::beast::http::request<Body, Fields>& request_;
  std::string peer_;
};

template <class Body, class Fields>
Verdict CheckBeast(const RateLimiter& limiter,
                   const boost::beast::http::request<Body, Fields>& request,
                   const boost::asio::ip::tcp::endpoint& peer) {
  return limiter.Check(BeastRequest<Body, Fields>(request, peer));
}

// Calls `proceed()` once the verdict's delay has passed: at once when there is none, else from a
// timer on `executor`, which no thread waits on meanwhile.
template <class Executor, class Proceed>
void AfterDelay(const Verdict& verdict, const Executor& executor, Proceed proceed) {
  if (verdict.delay.count() <= 0) return proceed();
  auto timer = std::make_shared<boost::asio::steady_timer>(executor, verdict.delay);
  timer->async_wait([timer, proceed = std::move(proceed)](
                        const boost::system::error_code&) mutable { proceed(); });
}

// Copies the verdict's RateLimit headers onto a response.
template <class Response>
void AddHeaders(const Verdict& verdict, Response& response) {
  for (const auto& [name, value] : verdict.headers) response.set(name, value);
}

// The 429 response for a denied request.
template <class Body, class Fields>
boost::beast::http::response<boost::beast::http::string_body> Rejection(
    const Verdict& verdict, const boost::beast::http::request<Body, Fields>& request) {
  boost::beast::http::response<boost::beast::http::string_body> response(
      static_cast<boost::beast::http::status>(verdict.status), request.version());
  response.set(boost::beast::http::field::content_type, "application/json");
  AddHeaders(verdict, response);
  response.keep_alive(request.keep_alive());
  response.body() = verdict.body;
  response.prepare_payload();
  return response;
}

}  // namespace sluice::middleware
