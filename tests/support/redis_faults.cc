#include "support/redis_faults.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

// The integer of a reply: "N" from redis-cli, ":N" from the wire; -1 if it is not one.
int64_t IntegerReply(std::string_view reply) {
  if (reply.starts_with(":")) reply.remove_prefix(1);
  if (reply.empty()) return -1;
  int64_t n = 0;
  for (char c : reply) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool Expect(bool ok, const char* what, const std::string& reply) {
  if (!ok) std::fprintf(stderr, "FaultInjector: %s answered '%s'\n", what, reply.c_str());
  return ok;
}

}  // namespace

const char* RedisFaultName(RedisFault fault) {
  switch (fault) {
    case RedisFault::kKilled:
      return "Killed";
    case RedisFault::kHung:
      return "Hung";
    case RedisFault::kSlowed:
      return "Slowed";
    case RedisFault::kScriptsFlushed:
      return "ScriptsFlushed";
    case RedisFault::kClientsKilled:
      return "ClientsKilled";
    case RedisFault::kFull:
      return "Full";
  }
  return "?";
}

bool PolicyMustDecide(RedisFault fault) {
  return fault != RedisFault::kScriptsFlushed && fault != RedisFault::kClientsKilled;
}

std::unique_ptr<FaultInjector> FaultInjector::Create(RedisServer& server, RedisFault fault) {
  std::unique_ptr<FaultInjector> injector(new FaultInjector(server, fault));
  if (fault == RedisFault::kSlowed) injector->proxy_ = std::make_unique<DelayProxy>(server.port());
  if (fault == RedisFault::kFull) {
    const std::string config = server.Cli({"CONFIG", "GET", "maxclients"});  // "maxclients\nN"
    injector->maxclients_ = config.substr(config.find('\n') + 1);
    if (!Expect(IntegerReply(injector->maxclients_) > 0, "CONFIG GET maxclients", config)) {
      return nullptr;
    }
    injector->connection_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{.tv_sec = 2, .tv_usec = 0};
    setsockopt(injector->connection_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(server.port()));
    if (connect(injector->connection_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      std::perror("FaultInjector: connect");
      return nullptr;
    }
    const std::string id = injector->Command("CLIENT ID");
    injector->connection_id_ = IntegerReply(id);
    if (!Expect(injector->connection_id_ >= 0, "CLIENT ID", id)) return nullptr;
  }
  return injector;
}

FaultInjector::~FaultInjector() {
  if (connection_ >= 0) close(connection_);
}

int FaultInjector::port() const { return proxy_ ? proxy_->port() : server_.port(); }

std::string FaultInjector::Command(const std::string& inline_command) const {
  const std::string bytes = inline_command + "\r\n";
  if (send(connection_, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(bytes.size())) {
    return "(send failed)";
  }
  std::string reply;
  char c;
  while (!reply.ends_with("\r\n") && recv(connection_, &c, 1, 0) == 1) reply += c;
  if (reply.ends_with("\r\n")) reply.resize(reply.size() - 2);
  return reply;
}

bool FaultInjector::Inject() {
  switch (fault_) {
    case RedisFault::kKilled:
      server_.Kill();
      return true;
    case RedisFault::kHung:
      server_.Pause();
      return true;
    case RedisFault::kSlowed:
      proxy_->set_delay(100ms);
      return true;
    case RedisFault::kScriptsFlushed:
      for (int i = 0; i < 5; ++i) {
        if (i > 0) std::this_thread::sleep_for(100ms);
        const std::string reply = server_.Cli({"SCRIPT", "FLUSH"});
        if (!Expect(reply == "OK", "SCRIPT FLUSH", reply)) return false;
      }
      return true;
    case RedisFault::kClientsKilled: {
      const std::string reply = server_.Cli({"CLIENT", "KILL", "TYPE", "normal"});
      killed_ = IntegerReply(reply);
      return Expect(killed_ >= 0, "CLIENT KILL TYPE normal", reply);
    }
    case RedisFault::kFull: {
      const std::string set = Command("CONFIG SET maxclients 1");
      if (!Expect(set == "+OK", "CONFIG SET maxclients 1", set)) return false;
      const std::string reply = Command("CLIENT KILL TYPE normal");
      killed_ = IntegerReply(reply);
      return Expect(killed_ >= 0, "CLIENT KILL TYPE normal", reply);
    }
  }
  return false;
}

bool FaultInjector::Clear() {
  switch (fault_) {
    case RedisFault::kKilled:
      return server_.Restart();
    case RedisFault::kHung:
      server_.Resume();
      return true;
    case RedisFault::kSlowed:
      proxy_->set_delay(0ms);
      return true;
    case RedisFault::kScriptsFlushed:
    case RedisFault::kClientsKilled:
      return true;
    case RedisFault::kFull: {
      const std::string set = Command("CONFIG SET maxclients " + maxclients_);
      return Expect(set == "+OK", "CONFIG SET maxclients", set);
    }
  }
  return false;
}

std::set<int64_t> FaultInjector::ClientIds() const {
  std::set<int64_t> ids;
  std::istringstream list(server_.Cli({"CLIENT", "LIST"}));
  for (std::string line; std::getline(list, line);) {
    if (!line.starts_with("id=") || line.find(" cmd=client|list ") != std::string::npos) continue;
    const int64_t id = IntegerReply(line.substr(3, line.find(' ') - 3));
    if (id >= 0 && id != connection_id_) ids.insert(id);
  }
  return ids;
}

size_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6)) * 1024;  // "  1234 kB"
  }
  return 0;
}

double CpuPressure() {
  std::ifstream pressure("/proc/pressure/cpu");
  std::string some, avg10;  // "some avg10=12.34 avg60=..."
  if (!(pressure >> some >> avg10) || some != "some" || !avg10.starts_with("avg10=")) return -1;
  return std::stod(avg10.substr(6));
}

ResidentPeak::ResidentPeak(pid_t pid) : pid_(pid), peak_(ResidentBytes(pid)) {
  sampler_ = std::thread([this] {
    for (int i = 0; !stop_.load() && i < 100'000; ++i) {  // 1000 s at most
      const size_t now = ResidentBytes(pid_);
      size_t seen = peak_.load();
      while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(10ms);
    }
  });
}

ResidentPeak::~ResidentPeak() {
  stop_ = true;
  sampler_.join();
}

size_t ResidentPeak::Restart() {
  const size_t now = ResidentBytes(pid_);
  peak_ = now;
  return now;
}

}  // namespace sluice::testing
