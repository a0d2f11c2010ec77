// Fuzzes the HTTP API as a function: the first byte picks a method and target, the rest is the
// body; for /v1/auth, the request's peer address (its first line) and headers ("Name: value"
// lines), as a proxy would send them. Every input must be answered exactly once, with a known
// status and, for JSON answers, a body that is valid JSON: at once (the store decides inline), or,
// for an acquire that waits, once the timers have run through the longest wait, or when its client
// is said to have left. No timer may be left pending. A JSON body with a key twice in an object
// is refused with a 400 naming it.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "http/api.h"
#include "json_oracle.h"
#include "sluice/acquirer.h"
#include "sluice/memory_store.h"
#include "sluice/middleware/middleware.h"

namespace {

using sluice::http::Api;

struct Route {
  std::string_view method;
  std::string_view target;
  bool abandon = false;  // the client leaves while its acquire waits
  bool reads_json() const {
    return method == "POST" && (target == "/v1/check" || target == "/v1/acquire");
  }
};

constexpr Route kRoutes[] = {
    {"POST", "/v1/check"},    {"GET", "/healthz"},           {"GET", "/readyz"},
    {"GET", "/metrics"},      {"GET", "/v1/check"},          {"POST", "/nowhere?x=1"},
    {"POST", "/v1/acquire"},  {"POST", "/v1/acquire", true}, {"GET", "/v1/auth/auth"},
    {"HEAD", "/v1/auth/api"},
};

// A forward-auth request: its peer and headers from the fuzzer's bytes.
class FuzzedRequest final : public sluice::middleware::RequestView {
 public:
  explicit FuzzedRequest(std::string_view text) {
    const auto line = [&text] {
      const size_t end = text.find('\n');
      const std::string_view first = text.substr(0, end);
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
      return first;
    };
    peer_ = line();
    while (!text.empty()) {
      const std::string_view header = line();
      const size_t colon = header.find(':');
      if (colon != std::string_view::npos) {
        headers_.emplace_back(header.substr(0, colon), header.substr(colon + 1));
      }
    }
  }

  std::string_view peer_address() const override { return peer_; }
  std::string_view path() const override { return "/v1/auth"; }
  void ForEachHeaderValue(std::string_view name,
                          const std::function<void(std::string_view)>& visit) const override {
    for (const auto& [n, value] : headers_) {
      if (std::equal(n.begin(), n.end(), name.begin(), name.end(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        visit(value);
      }
    }
  }

 private:
  std::string_view peer_;
  std::vector<std::pair<std::string_view, std::string_view>> headers_;
};

constexpr std::string_view kRules = R"(forward_auth: { trusted_proxies: [10.0.0.0/8, "::1"] }
rules:
  - { name: auth, algorithm: fixed_window, limit: 3, period: 1s, deny_status: 403,
      key: [forwarded_for, real_ip, { header: X-Api-Key }, method, uri] }
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
  for (int s : {200, 204, 400, 401, 403, 404, 405, 413, 503}) {
    if (s == status) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Service* service = new Service();
  if (size == 0) return 0;
  // A digit picks the route it names ('0' the first), as the seeds in fuzz/corpus/api are written.
  const Route& route = kRoutes[static_cast<uint8_t>(data[0] - '0') % std::size(kRoutes)];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  int answers = 0;
  sluice::http::Exchange exchange([&answers] { ++answers; });
  const FuzzedRequest client(body);
  const bool waits = service->api.Handle({route.method, route.target, body, &client}, exchange);
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
  // A JSON body with a key twice in an object is refused, whatever else it holds.
  if (route.reads_json() && body.size() <= sluice::http::kMaxBodyBytes &&
      sluice::fuzz::JsonOracle::Read(body).duplicate_key &&
      (response.status != 400 || !response.body.starts_with(R"({"error":"duplicate key ')"))) {
    std::abort();
  }
  if (response.status == 204
          ? !response.body.empty()
          : response.content_type == "application/json" &&
                nlohmann::json::parse(response.body, nullptr, false).is_discarded()) {
    std::abort();
  }
  return 0;
}
