// The store suites' target in the store test binary: one redis-server.
#include "store_test_support.h"

namespace sluice::testing {

const RedisTarget* SharedTarget() {
  static std::unique_ptr<RedisServer> server = RedisServer::Start();
  static const RedisTarget target =
      server == nullptr ? RedisTarget{} : RedisTarget{server->url(), {server->port()}};
  return server == nullptr ? nullptr : &target;
}

}  // namespace sluice::testing
