// A TCP proxy on loopback for fault tests: everything read from either side is written to the
// other once a settable delay has passed, in order, so a Redis behind it looks slow (the delay
// applies per direction: +100 ms each way is +200 ms per round trip). It forwards to one
// upstream port and stops, closing every connection, when destroyed.
//
// Thread-safe: set_delay may be called from any thread while connections are being served.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice::testing {

class DelayProxy {
 public:
  // Listens on a free loopback port at once; connects to `upstream_port` per accepted client.
  explicit DelayProxy(int upstream_port);
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  int port() const { return port_; }
  // Applies to what is read from now on; what is already waiting keeps its time.
  void set_delay(std::chrono::milliseconds delay) { delay_ms_ = delay.count(); }

 private:
  void Accept();
  void Pump(int from, int to);

  const int upstream_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> delay_ms_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;  // both ends of every proxied connection; guarded by mu_
  std::vector<std::thread> pumps_;
};

}  // namespace sluice::testing
