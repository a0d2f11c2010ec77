// The rate-limiting middleware for Boost.Beast servers. In an asynchronous session, once a
// request is read (`self` the session's shared_ptr):
//
//   namespace mw = sluice::middleware;
//   mw::CheckBeastAsync(per_ip, request, socket.remote_endpoint(), socket.get_executor(),
//                       [self](mw::Verdict verdict) {
//     if (!verdict.allowed) return self->send(mw::Rejection(verdict, self->request));
//     // With shaping (RateLimiterOptions::delay), hold the request until its slot on a timer.
//     mw::AfterDelay(verdict, self->socket.get_executor(), [self, verdict] {
//       auto response = self->handle(self->request);
//       mw::AddHeaders(verdict, response);
//       self->send(std::move(response));
//     });
//   });
//
// No I/O thread waits for the store: the verdict comes back on the session's executor when the
// store answers. CheckBeast is the blocking form, for a handler on a thread of its own (or a
// MemoryStore, which decides inline): on an I/O thread it stalls every connection of that
// thread for a Redis round trip.
//
// Thread safety: as RateLimiter.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
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
  void ForEachHeaderValue(std::string_view name,
                          const std::function<void(std::string_view)>& visit) const override {
    const auto [first, last] =
        request_.equal_range(boost::beast::string_view(name.data(), name.size()));
    for (auto it = first; it != last; ++it) {
      visit(std::string_view(it->value().data(), it->value().size()));
    }
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

// Checks `request` without blocking: `done(Verdict)` runs once, posted to `executor` (the
// session's), never on a store thread. The request and the peer are read before this returns;
// the RateLimiter must outlive the call of `done`, which may be move-only.
template <class Body, class Fields, class Executor, class Done>
void CheckBeastAsync(const RateLimiter& limiter,
                     const boost::beast::http::request<Body, Fields>& request,
                     const boost::asio::ip::tcp::endpoint& peer, const Executor& executor,
                     Done done) {
  auto shared_done = std::make_shared<Done>(std::move(done));
  limiter.CheckAsync(
      BeastRequest<Body, Fields>(request, peer), [executor, shared_done](Verdict verdict) {
        boost::asio::post(executor, [shared_done, verdict = std::move(verdict)]() mutable {
          (*shared_done)(std::move(verdict));
        });
      });
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

// The response refusing a request: 429 when the limit denied it, 503 or 500 when the limiter
// could not decide (middleware.h).
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
