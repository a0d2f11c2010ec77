// Faults of a real redis-server under a steady concurrent load, through RedisStore wrapped in a
// ResilientStore (the stack `sluice serve` runs): the server killed and restarted, hung
// (SIGSTOP), slowed by a latency-injecting proxy, its script cache flushed and its clients
// killed, and full (maxclients). For each: every decision returns within the deadline plus
// 10 ms, the failure policy decides during the fault, decisions come from Redis again within
// 1 s of the fault clearing, and a fresh window admits exactly its limit after recovery.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/redis_store.h"
#include "sluice/resilient_store.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr auto kDeadline = 50ms;
constexpr auto kSlack = 10ms;

// A TCP proxy on loopback that delays every chunk, in each direction, by a settable amount.
class DelayProxy {
 public:
  explicit DelayProxy(int upstream_port) : upstream_port_(upstream_port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listener_, 16);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~DelayProxy() {
    stopping_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    cv_.notify_all();
    for (auto& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
  }

  int port() const { return port_; }
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = d.count(); }

 private:
  void Accept() {
    while (!stopping_) {
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
      if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(client);
        close(server);
        continue;
      }
      std::lock_guard lock(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
      pumps_.emplace_back([this, client, server] { Pump(server, client); });
    }
  }

  // Reads from `from`; each chunk is written to `to` once its delay has passed, in order.
  void Pump(int from, int to) {
    struct Chunk {
      Steady::time_point due;
      std::string bytes;
    };
    std::deque<Chunk> queue;
    std::mutex queue_mu;
    std::condition_variable queue_cv;
    bool done = false;
    std::thread writer([&] {
      std::unique_lock lock(queue_mu);
      while (true) {
        queue_cv.wait(lock, [&] { return done || !queue.empty(); });
        if (queue.empty()) return;
        const auto due = queue.front().due;
        if (queue_cv.wait_until(lock, due, [&] { return done; })) return;
        std::string bytes = std::move(queue.front().bytes);
        queue.pop_front();
        lock.unlock();
        if (send(to, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) return;
        lock.lock();
      }
    });
    char buffer[16384];
    while (true) {
      const ssize_t n = recv(from, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      std::lock_guard lock(queue_mu);
      queue.push_back({Steady::now() + std::chrono::milliseconds(delay_ms_.load()),
                       std::string(buffer, static_cast<size_t>(n))});
      queue_cv.notify_one();
    }
    {
      std::lock_guard lock(queue_mu);
      done = true;
    }
    queue_cv.notify_one();
    writer.join();
    shutdown(to, SHUT_RDWR);
  }

  int upstream_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> delay_ms_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
};

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// What a load saw, per path.
struct LoadReport {
  std::atomic<int64_t> store{0}, policy{0}, cache{0}, errors{0};
  std::atomic<int64_t> max_latency_us{0};
  std::atomic<int64_t> decisions{0};
};

// Threads checking random keys until stopped; each decision timed.
class Load {
 public:
  Load(Limiter& limiter, int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &limiter, t] {
        for (int i = 0; !stop_.load() && i < 2'000'000; ++i) {
          const std::string key = "k" + std::to_string((t * 7919 + i) % 1000);
          const auto start = Steady::now();
          auto d = limiter.Check(key);
          const int64_t us =
              std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - start).count();
          int64_t seen = report_.max_latency_us.load();
          while (us > seen && !report_.max_latency_us.compare_exchange_weak(seen, us)) {
          }
          ++report_.decisions;
          if (!d.ok()) {
            ++report_.errors;
          } else if (d->source == DecisionSource::kStore) {
            ++report_.store;
          } else if (d->source == DecisionSource::kHotKeyCache) {
            ++report_.cache;
          } else {
            ++report_.policy;
          }
          std::this_thread::sleep_for(200us);  // a steady load, not a spin
        }
      });
    }
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  LoadReport& report() { return report_; }

 private:
  std::atomic<bool> stop_{false};
  LoadReport report_;
  std::vector<std::thread> threads_;
};

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::RedisServer::Start(ServerArgs());
    ASSERT_NE(server_, nullptr);
  }
  virtual std::vector<std::string> ServerArgs() { return {}; }

  void Open(int port) {
    auto store =
        RedisStore::Create(RedisStoreOptions{.url = "redis://127.0.0.1:" + std::to_string(port),
                                             .timeout = kDeadline,
                                             .key_prefix = "fault:"});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    redis_ = std::move(store).value();
    resilient_ = std::make_unique<ResilientStore>(
        *redis_, ResilientStoreOptions{.failures_to_open = 5, .open_for = 200ms, .instances = 2});
    auto limit = Limit::Create(Algorithm::kGcra, 1'000'000, 1s);
    limiter_ =
        std::make_unique<Limiter>(*resilient_, "load", *limit, FailurePolicy::kLocalFallback);
  }

  // Runs the load through `fault`, then `clear`, and checks everything the fault promises.
  void RunFault(const std::function<void()>& fault, const std::function<void()>& clear,
                bool policy_must_decide = true) {
    const size_t rss_before = ResidentBytes();
    Load load(*limiter_, 4);
    std::this_thread::sleep_for(300ms);
    const int64_t store_before = load.report().store.load();
    EXPECT_GT(store_before, 0) << "the load reached Redis before the fault";

    fault();
    std::this_thread::sleep_for(800ms);
    const int64_t policy_during = load.report().policy.load();
    clear();
    const auto cleared = Steady::now();

    // Served by Redis again within 1 s: a probe of our own sees the store decide.
    auto limit = Limit::Create(Algorithm::kGcra, 1'000'000, 1s);
    Limiter probe(*resilient_, "probe", *limit, FailurePolicy::kFailClosed);
    bool recovered = false;
    for (int i = 0; i < 400 && Steady::now() - cleared < 3s; ++i) {
      auto d = probe.Check("probe");
      if (d.ok() && d->source == DecisionSource::kStore) {
        recovered = true;
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    const auto recovery = Steady::now() - cleared;
    std::this_thread::sleep_for(200ms);
    load.Stop();
    const auto& r = load.report();
    std::printf(
        "fault report: decisions %ld store %ld policy %ld (during fault %ld) errors %ld "
        "max latency %.1f ms, recovered in %.0f ms, RSS +%zu KiB\n",
        static_cast<long>(r.decisions.load()), static_cast<long>(r.store.load()),
        static_cast<long>(r.policy.load()), static_cast<long>(policy_during),
        static_cast<long>(r.errors.load()), static_cast<double>(r.max_latency_us) / 1000,
        std::chrono::duration<double, std::milli>(recovery).count(),
        (ResidentBytes() - std::min(ResidentBytes(), rss_before)) / 1024);

    EXPECT_EQ(r.errors.load(), 0) << "every decision is made, by Redis or by the policy";
    EXPECT_LE(r.max_latency_us.load(),
              std::chrono::duration_cast<std::chrono::microseconds>(kDeadline + kSlack).count());
    if (policy_must_decide) {
      EXPECT_GT(policy_during, 0) << "the policy decided during the fault";
    }
    ASSERT_TRUE(recovered);
    EXPECT_LT(recovery, 1s);
    EXPECT_LT(ResidentBytes(), rss_before + (64u << 20)) << "bounded memory";
    ExpectExactAfterRecovery();
  }

  // A fresh fixed window admits exactly its limit, every decision from Redis.
  void ExpectExactAfterRecovery() {
    auto limit = Limit::Create(Algorithm::kFixedWindow, 50, std::chrono::hours(1));
    Limiter exact(*resilient_, "exact", *limit, FailurePolicy::kFailClosed);
    std::atomic<int> admitted{0}, not_from_store{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 40; ++i) {
          auto d = exact.Check("fresh-window");
          if (!d.ok() || d->source != DecisionSource::kStore) {
            if (!(d.ok() && d->source == DecisionSource::kHotKeyCache)) ++not_from_store;
            continue;
          }
          admitted += d->allowed;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(admitted.load(), 50);
    EXPECT_EQ(not_from_store.load(), 0);
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisStore> redis_;
  std::unique_ptr<ResilientStore> resilient_;
  std::unique_ptr<Limiter> limiter_;
};

TEST_F(FaultTest, KilledAndRestarted) {
  Open(server_->port());
  RunFault([&] { server_->Kill(); }, [&] { ASSERT_TRUE(server_->Restart()); });
}

TEST_F(FaultTest, HungBySigstop) {
  Open(server_->port());
  RunFault([&] { server_->Pause(); }, [&] { server_->Resume(); });
}

TEST_F(FaultTest, SlowedByALatencyProxy) {
  DelayProxy proxy(server_->port());
  Open(proxy.port());
  RunFault([&] { proxy.set_delay(100ms); }, [&] { proxy.set_delay(0ms); });
  redis_.reset();  // before the proxy goes
  resilient_.reset();
}

TEST_F(FaultTest, ScriptFlushLosesNoDecision) {
  Open(server_->port());
  Load load(*limiter_, 4);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(server_->Cli({"SCRIPT", "FLUSH"}), "OK");
  }
  std::this_thread::sleep_for(100ms);
  load.Stop();
  EXPECT_EQ(load.report().policy.load(), 0) << "NOSCRIPT is handled inside the client";
  EXPECT_EQ(load.report().errors.load(), 0);
  EXPECT_GT(load.report().store.load(), 0);
}

TEST_F(FaultTest, ClientsKilled) {
  Open(server_->port());
  RunFault(
      [&] {
        server_->Cli({"CLIENT", "KILL", "TYPE", "normal"});
      },
      [] {},
      /*policy_must_decide=*/false);  // it reconnects at once: few or no decisions fail
}

class FullServerTest : public FaultTest {
  std::vector<std::string> ServerArgs() override { return {"--maxclients", "1"}; }
};

TEST_F(FullServerTest, RefusingConnections) {
  // The one allowed client is someone else's; ours is refused ("max number of clients").
  auto squatter = RedisStore::Create(RedisStoreOptions{.url = server_->url()});
  ASSERT_TRUE(squatter.ok());
  Open(server_->port());
  auto limit = Limit::Create(Algorithm::kGcra, 10, 1s);
  Limiter limiter(*resilient_, "full", *limit, FailurePolicy::kLocalFallback);
  const auto start = Steady::now();
  auto d = limiter.Check("k");
  EXPECT_LT(Steady::now() - start, kDeadline + kSlack);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  squatter->reset();  // room again: our client's reconnection gets in
  bool recovered = false;
  for (int i = 0; i < 300 && !recovered; ++i) {
    auto again = limiter.Check("k2");
    recovered = again.ok() && again->source == DecisionSource::kStore;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(recovered);
}

}  // namespace
}  // namespace sluice
