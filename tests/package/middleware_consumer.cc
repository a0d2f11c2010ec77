// Links the packaged middleware library through pkg-config: 3 per second answers 3 of 5 requests
// for one path with 200 and the other 2 with 429 and a Retry-After.
#include <sluice/limiter.h>
#include <sluice/memory_store.h>
#include <sluice/middleware/middleware.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

class Request : public sluice::middleware::RequestView {
 public:
  std::string_view peer_address() const override { return "127.0.0.1"; }
  std::string_view path() const override { return "/orders"; }
  void ForEachHeaderValue(std::string_view,
                          const std::function<void(std::string_view)>&) const override {}
};

}  // namespace

int main() {
  sluice::ManualClock clock;
  sluice::MemoryStore store(sluice::MemoryStoreOptions{.clock = &clock});
  auto limit = sluice::Limit::Create(sluice::Algorithm::kGcra, 3, std::chrono::seconds(1));
  if (!limit.ok()) return 1;
  sluice::Limiter limiter(store, "consumer", *limit);
  auto rate_limiter =
      sluice::middleware::RateLimiter::Create(limiter, sluice::middleware::Path(), "orders");
  if (!rate_limiter.ok()) return 1;
  int ok = 0, limited = 0;
  for (int i = 0; i < 5; ++i) {
    const sluice::middleware::Verdict verdict = rate_limiter->Check(Request());
    if (verdict.status == 200) ++ok;
    for (const auto& [name, value] : verdict.headers) {
      if (verdict.status == 429 && name == "Retry-After") ++limited;
    }
  }
  std::printf("middleware answered 200 to %d and 429 with Retry-After to %d of 5\n", ok, limited);
  return ok == 3 && limited == 2 ? 0 : 1;
}
