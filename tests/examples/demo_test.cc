// sluice-demo as its README shows it: 20 parallel requests give exactly five 200 and fifteen
// 429; and with three demo processes sharing one Redis, 20 parallel requests spread over the
// three still give exactly five 200.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_server.h"

namespace {

using namespace std::chrono_literals;

std::string demo_binary;

// A sluice-demo process on a free loopback port, killed when destroyed.
class Demo {
 public:
  explicit Demo(const std::string& store_url) : port_(sluice::testing::FreeLoopbackPort()) {
    const std::string listen = "127.0.0.1:" + std::to_string(port_);
    pid_ = fork();
    if (pid_ == 0) {
      execl(demo_binary.c_str(), demo_binary.c_str(), "--listen", listen.c_str(), "--store",
            store_url.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    httplib::Client probe("127.0.0.1", port_);
    probe.set_connection_timeout(100ms);
    for (int i = 0; i < 100 && !probe.Get("/healthz"); ++i) std::this_thread::sleep_for(20ms);
  }
  ~Demo() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

struct Counts {
  int ok = 0, limited = 0, other = 0;
};

Counts TwentyParallelRequests(const std::vector<int>& ports) {
  std::atomic<int> ok{0}, limited{0}, other{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) {
    clients.emplace_back([&, port = ports[i % ports.size()]] {
      httplib::Client client("127.0.0.1", port);
      client.set_connection_timeout(2s);
      client.set_read_timeout(2s);
      auto res = client.Get("/test");
      if (res && res->status == 200) {
        ++ok;
      } else if (res && res->status == 429 && res->has_header("Retry-After") &&
                 res->body == R"({"error":"rate limit exceeded"})") {
        ++limited;
      } else {
        ++other;
      }
    });
  }
  for (auto& c : clients) c.join();
  return {ok.load(), limited.load(), other.load()};
}

TEST(Demo, TwentyParallelRequestsAdmitExactlyFive) {
  Demo demo("memory://");
  const Counts counts = TwentyParallelRequests({demo.port()});
  EXPECT_EQ(counts.ok, 5);
  EXPECT_EQ(counts.limited, 15);
  EXPECT_EQ(counts.other, 0);
}

TEST(Demo, ThreeProcessesSharingRedisAdmitExactlyFive) {
  auto redis = sluice::testing::RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  Demo a(redis->url()), b(redis->url()), c(redis->url());
  const Counts counts = TwentyParallelRequests({a.port(), b.port(), c.port()});
  EXPECT_EQ(counts.ok, 5);
  EXPECT_EQ(counts.limited, 15);
  EXPECT_EQ(counts.other, 0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH_TO_SLUICE_DEMO\n", argv[0]);
    return 2;
  }
  demo_binary = argv[1];
  return RUN_ALL_TESTS();
}
