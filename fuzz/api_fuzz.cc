// Fuzzes the HTTP API as a function: the first byte picks a method and target, the rest is the
// body. Every input must be answered exactly once, with a known status and, for JSON answers, a
// body that is valid JSON: at once (the store decides inline), or, for an acquire that waits,
// once the timers have run through the longest wait, or when its client is said to have left.
// No timer may be left pending.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "config/config.h"
#include "http/api.h"
#include "sluice/acquirer.h"
#include "sluice/memory_store.h"

namespace {

using sluice::http::Api;

struct Route {
  std::string_view method;
  std::string_view target;
  bool abandon = false;  // the client leaves while its acquire waits
};

constexpr Route kRoutes[] = {
    {"POST", "/v1/check"},   {"GET", "/healthz"},           {"GET", "/readyz"},
    {"GET", "/metrics"},     {"GET", "/v1/check"},          {"POST", "/nowhere?x=1"},
    {"POST", "/v1/acquire"}, {"POST", "/v1/acquire", true},
};

constexpr std::string_view kRules = R"(rules:
  - { name: api, algorithm: gcra, limit: 100, period: 1m, burst: 20 }
  - { name: log, algorithm: sliding_log, limit: 5, period: 1s }
  - { name: win, algorithm: sliding_window, limit: 10, period: 10s }
  - { name: fixed, algorithm: fixed_window, limit: 3, period: 1s, max_waiters_per_key: 2 }
  - { name: tb, algorithm: token_bucket, limit: 10, period: 1s, burst: 50 }
  - { name: lb, algorithm: leaky_bucket, limit: 2, period: 1s, max_waiters: 3 }
)";

struct Service {
  sluice::ManualClock clock;
  sluice::ManualTimers timers{clock};
  sluice::MemoryStore store{sluice::MemoryStoreOptions{.clock = &clock, .max_keys = 100'000}};
  sluice::http::Metrics metrics;
  Api api{store, metrics,
          sluice::http::RuleTable::Build(
              sluice::config::ParseConfig(kRules, "fuzz.yaml").value().rules, store, metrics),
          nullptr, &timers};
};

bool KnownStatus(int status) {
  for (int s : {200, 400, 404, 405, 413, 503}) {
    if (s == status) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Service* service = new Service();
  if (size == 0) return 0;
  const Route& route = kRoutes[data[0] % std::size(kRoutes)];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  int answers = 0;
  sluice::http::Exchange exchange([&answers] { ++answers; });
  const bool waits = service->api.Handle({route.method, route.target, body}, exchange);
  if (waits != (answers == 0)) std::abort();
  if (waits && route.abandon) {
    service->api.Abandon(exchange);
  } else if (waits) {
    service->timers.Advance(sluice::http::kMaxAcquireWait);
  }
  service->timers.Advance(std::chrono::milliseconds(7));

  const sluice::http::Response& response = exchange.response;
  if (answers != 1 || !KnownStatus(response.status) || service->timers.pending() != 0) {
    std::abort();
  }
  if (response.content_type == "application/json" &&
      nlohmann::json::parse(response.body, nullptr, false).is_discarded()) {
    std::abort();
  }
  return 0;
}
