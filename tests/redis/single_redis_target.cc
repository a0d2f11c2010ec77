// The store suites' target in the store test binary: one redis-server.
#include "store_test_support.h"

namespace sluice::testing {

const RedisTarget* SharedTarget() {
  static std::unique_ptr<RedisServer> server = RedisServer::Start();
  if (server == nullptr) return nullptr;
  static const RedisTarget target{
      server->url(), {server->port()}, [port = server->port()](std::string_view) { return port; }};
  return &target;
}

}  // namespace sluice::testing
