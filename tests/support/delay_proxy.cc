#include "support/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <string>

namespace sluice::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

}  // namespace

DelayProxy::DelayProxy(int upstream_port) : upstream_port_(upstream_port) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof addr;
  bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  listen(listener_, 64);
  getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

DelayProxy::~DelayProxy() {
  stopping_ = true;
  shutdown(listener_, SHUT_RDWR);  // wakes the blocked accept()
  close(listener_);
  acceptor_.join();
  {
    std::lock_guard lock(mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);  // wakes every pump's recv() and send()
  }
  for (auto& t : pumps_) t.join();
  for (int fd : fds_) close(fd);
}

void DelayProxy::Accept() {
  while (!stopping_) {
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in upstream = Loopback(upstream_port_);
    if (connect(server, reinterpret_cast<const sockaddr*>(&upstream), sizeof upstream) != 0) {
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

// Reads from `from`; a writer thread sends each chunk to `to` once its delay has passed, in
// order. When `from` closes, `to` is shut down, so the other pump ends too.
void DelayProxy::Pump(int from, int to) {
  struct Chunk {
    std::chrono::steady_clock::time_point due;
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
    queue.push_back({std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms_.load()),
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

}  // namespace sluice::testing
