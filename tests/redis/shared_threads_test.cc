// A client on I/O threads shared with the caller's own work (`sluice serve` runs its HTTP
// connections on them): a call made on one of the threads goes out on a connection of that thread
// and is answered there, so that no other thread is woken for it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/io_threads.h"
#include "support/redis_server.h"

namespace sluice::redis {
namespace {

using namespace std::chrono_literals;

// The threads the callbacks of `calls` PINGs made on thread `t` ran on.
std::vector<int> AnsweredOn(Client& client, IoThreads& threads, int t, int calls) {
  auto answered = std::make_shared<std::promise<std::vector<int>>>();
  boost::asio::post(threads.at(t), [&client, &threads, calls, answered] {
    auto seen = std::make_shared<std::vector<int>>();
    for (int i = 0; i < calls; ++i) {
      const std::string_view ping[] = {"PING"};
      client.Command(ping, [&threads, calls, seen, answered](Result<Reply> reply) {
        EXPECT_TRUE(reply.ok()) << reply.status().ToString();
        seen->push_back(threads.current());  // every callback runs on a client thread, one by one
        if (static_cast<int>(seen->size()) == calls) answered->set_value(*seen);
      });
    }
  });
  return answered->get_future().get();
}

TEST(SharedIoThreads, ACallMadeOnAClientThreadIsAnsweredOnIt) {
  auto server = testing::RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto threads = std::make_shared<IoThreads>(2);
  EXPECT_EQ(threads->current(), -1);
  ClientOptions options;
  options.port = server->port();
  options.timeout = 5s;
  options.connections_per_thread = 1;
  auto client = Client::Create(options, threads);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // Both connections up, each on its thread (a loaded machine may take longer than Create waits).
  for (int i = 0; i < 500 && (*client)->stats_for_testing().connects < 2; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ((*client)->stats_for_testing().connects, 2u);
  for (int t : {0, 1, 0, 1}) {
    for (int on : AnsweredOn(**client, *threads, t, 20)) EXPECT_EQ(on, t);
  }
}

}  // namespace
}  // namespace sluice::redis
