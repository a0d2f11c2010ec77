// sluice-demo: the reference app of the Redis rate-limiting articles, in C++. GET /test is
// limited to 5 requests per 10 seconds per client IP; beyond that it answers 429. With
// --store redis://... several demo processes share one limit.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <string>

#include "sluice/limiter.h"
#include "sluice/middleware/httplib.h"
#include "sluice/open_store.h"
#include "sluice/resilient_store.h"

namespace {

httplib::Server* running_server = nullptr;

void Stop(int) {
  if (running_server != nullptr) running_server->stop();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice-demo: GET /test, 5 requests per 10 s per client IP"};
  std::string listen = "127.0.0.1:8081", store_url = "memory://";
  app.add_option("--listen", listen, "HOST:PORT")->capture_default_str();
  app.add_option("--store", store_url, "memory:// or redis://host:port")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const auto colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || (port = std::atoi(listen.c_str() + colon + 1)) <= 0) {
    std::fprintf(stderr, "sluice-demo: --listen must be HOST:PORT, got '%s'\n", listen.c_str());
    return 2;
  }
  auto backend = sluice::OpenStore(store_url);
  if (!backend.ok()) {
    std::fprintf(stderr, "sluice-demo: %s\n", backend.status().ToString().c_str());
    return 2;
  }
  // If Redis fails, each demo process keeps limiting on its own.
  sluice::ResilientStore store(**backend);
  auto limit = sluice::Limit::Create(sluice::Algorithm::kSlidingLog, 5, std::chrono::seconds(10));
  sluice::Limiter limiter(store, "demo", *limit, sluice::FailurePolicy::kLocalFallback);
  auto per_ip =
      sluice::middleware::RateLimiter::Create(limiter, sluice::middleware::ClientIp(), "demo");
  if (!per_ip.ok()) {
    std::fprintf(stderr, "sluice-demo: %s\n", per_ip.status().ToString().c_str());
    return 2;
  }

  httplib::Server server;
  server.Get("/test", sluice::middleware::Limited(
                          *per_ip, [](const httplib::Request&, httplib::Response& response) {
                            response.set_content(R"({"message":"ok"})", "application/json");
                          }));
  running_server = &server;
  std::signal(SIGTERM, Stop);
  std::signal(SIGINT, Stop);
  const std::string host = listen.substr(0, colon);
  if (!server.bind_to_port(host.c_str(), port)) {
    std::fprintf(stderr, "sluice-demo: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::printf("sluice-demo listening on %s, store %s\n", listen.c_str(), store_url.c_str());
  std::fflush(stdout);
  return server.listen_after_bind() ? 0 : 1;
}
