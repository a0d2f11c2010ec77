#include "support/redis_sentinel.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice::testing {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// The value of `field` in a reply of alternating names and values (SENTINEL MASTER).
std::string FieldOf(const std::string& reply, const std::string& field) {
  const auto lines = Lines(reply);
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    if (lines[i] == field) return lines[i + 1];
  }
  return {};
}

}  // namespace

std::unique_ptr<RedisSentinel> RedisSentinel::Start(SentinelSetup setup) {
  std::unique_ptr<RedisSentinel> group(new RedisSentinel());
  group->setup_ = std::move(setup);
  char dir_template[] = "/tmp/sluice-sentinel-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return nullptr;
  }
  group->dir_ = dir_template;
  const std::string& password = group->setup_.master_password;
  std::vector<std::string> common = {"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay",
                                     "0"};
  if (!password.empty()) {
    common.insert(common.end(), {"--requirepass", password, "--masterauth", password});
  }
  const bool tls = group->tls();
  if (tls) common.insert(common.end(), {"--tls-replication", "yes"});
  const auto start = [&](const std::vector<std::string>& args) {
    return tls ? RedisServer::StartTls(group->setup_.tls, args) : RedisServer::Start(args);
  };
  auto master = start(common);
  if (master == nullptr) return nullptr;
  std::vector<std::string> replica_args = common;
  replica_args.insert(
      replica_args.end(),
      {"--replicaof", "127.0.0.1", std::to_string(tls ? master->tls_port() : master->port())});
  auto replica = start(replica_args);
  if (replica == nullptr) return nullptr;
  group->servers_.push_back(std::move(master));
  group->servers_.push_back(std::move(replica));
  const int replica_port = group->servers_[1]->port();
  const auto synced_by = Steady::now() + 10s;
  while (group->Cli(replica_port, {"INFO", "replication"}).find("master_link_status:up") ==
         std::string::npos) {
    if (Steady::now() > synced_by) {
      std::fprintf(stderr, "RedisSentinel: the replica did not sync within 10 s\n");
      return nullptr;
    }
    std::this_thread::sleep_for(20ms);
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!group->StartSentinel(i)) {
      std::fprintf(stderr, "RedisSentinel: could not start sentinel %zu\n", i);
      return nullptr;
    }
  }
  if (!group->WaitUntilAcquainted(20s)) {
    std::fprintf(stderr, "RedisSentinel: the sentinels did not learn the setup within 20 s\n");
    return nullptr;
  }
  return group;
}

bool RedisSentinel::StartSentinel(size_t i) {
  const std::string dir = dir_ + "/sentinel" + std::to_string(i);
  std::filesystem::create_directories(dir);
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = FreeLoopbackPort();
    const int tls_port = tls() ? FreeLoopbackPort() : 0;
    if (tls_port == port) continue;
    const std::string conf = dir + "/sentinel.conf";
    {
      std::ofstream out(conf);
      const std::string& name = setup_.master_name;
      out << "port " << port << "\nbind 127.0.0.1\ndaemonize no\ndir " << dir << "\nlogfile " << dir
          << "/sentinel.log\nsentinel resolve-hostnames no\n";
      if (tls()) {
        out << "tls-port " << tls_port << "\ntls-cert-file " << setup_.tls.cert_file
            << "\ntls-key-file " << setup_.tls.key_file << "\ntls-ca-cert-file "
            << setup_.tls.ca_file << "\ntls-auth-clients no\ntls-replication yes\n";
      }
      out << "sentinel monitor " << name << " 127.0.0.1 " << DataPort(0) << " 2\n"
          << "sentinel down-after-milliseconds " << name << " 1000\n"
          << "sentinel failover-timeout " << name << " 5000\n"
          << "sentinel parallel-syncs " << name << " 1\n";
      if (!setup_.master_password.empty()) {
        out << "sentinel auth-pass " << name << " " << setup_.master_password << "\n";
      }
      if (!setup_.sentinel_password.empty()) {
        out << "requirepass " << setup_.sentinel_password << "\n"
            << "sentinel sentinel-pass " << setup_.sentinel_password << "\n";
      }
    }
    const pid_t pid = fork();
    if (pid == 0) {
      execlp("redis-server", "redis-server", conf.c_str(), "--sentinel",
             static_cast<char*>(nullptr));
      _exit(127);
    }
    if (pid < 0) return false;
    const auto until = Steady::now() + 5s;
    bool up = false;
    while (Steady::now() < until) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) break;  // the port was taken
      if (RedisCli(port, {"PING"}, setup_.sentinel_password) == "PONG") {
        up = true;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    if (up) {
      sentinel_ports_.push_back(port);
      sentinel_tls_ports_.push_back(tls_port);
      sentinel_pids_.push_back(pid);
      return true;
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return false;
}

bool RedisSentinel::WaitUntilAcquainted(std::chrono::milliseconds timeout) const {
  const auto until = Steady::now() + timeout;
  while (Steady::now() < until) {
    bool all = true;
    for (size_t i = 0; i < sentinel_ports_.size() && all; ++i) {
      const std::string master = SentinelCli(i, {"SENTINEL", "MASTER", setup_.master_name});
      all = FieldOf(master, "flags") == "master" && FieldOf(master, "num-slaves") == "1" &&
            FieldOf(master, "num-other-sentinels") == "2";
    }
    if (all) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

RedisSentinel::~RedisSentinel() {
  for (pid_t pid : sentinel_pids_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  servers_.clear();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::string RedisSentinel::url(bool with_password) const {
  std::string url = tls() ? "rediss+sentinel://" : "redis+sentinel://";
  if (with_password && !setup_.master_password.empty()) {
    url += ":" + setup_.master_password + "@";
  }
  for (size_t i = 0; i < sentinel_ports_.size(); ++i) {
    url += (i == 0 ? "" : ",") + std::string("127.0.0.1:") +
           std::to_string(tls() ? sentinel_tls_ports_[i] : sentinel_ports_[i]);
  }
  return url + "/" + setup_.master_name;
}

std::vector<int> RedisSentinel::sentinel_ports() const { return sentinel_ports_; }

int RedisSentinel::DataPort(size_t i) const {
  return tls() ? servers_.at(i)->tls_port() : servers_.at(i)->port();
}

RedisServer* RedisSentinel::ServerOnPort(int port) {
  for (auto& s : servers_) {
    if (s->port() == port || (s->tls_port() != 0 && s->tls_port() == port)) return s.get();
  }
  return nullptr;
}

int RedisSentinel::PlainPort(int port) const {
  for (const auto& s : servers_) {
    if (s->tls_port() != 0 && s->tls_port() == port) return s->port();
  }
  return port;
}

std::string RedisSentinel::Cli(int port, const std::vector<std::string>& args) const {
  return RedisCli(PlainPort(port), args, setup_.master_password);
}

std::string RedisSentinel::SentinelCli(size_t i, const std::vector<std::string>& args) const {
  return RedisCli(sentinel_ports_.at(i), args, setup_.sentinel_password);
}

std::optional<int> RedisSentinel::MasterPort(size_t i) const {
  const auto lines =
      Lines(SentinelCli(i, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", setup_.master_name}));
  if (lines.size() != 2) return std::nullopt;
  return std::atoi(lines[1].c_str());
}

std::string RedisSentinel::RoleOf(int port) const {
  const auto lines = Lines(Cli(port, {"ROLE"}));
  return lines.empty() ? std::string() : lines[0];
}

long EvalShaCallsIn(const std::string& commandstats) {
  long total = 0;
  for (const std::string& line : Lines(commandstats)) {
    if (!line.starts_with("cmdstat_evalsha:")) continue;
    // ":calls=" first, then the others by their leading comma ("calls=" is inside them).
    for (const char* key : {":calls=", ",rejected_calls=", ",failed_calls="}) {
      const auto at = line.find(key);
      if (at != std::string::npos) total += std::atol(line.c_str() + at + std::strlen(key));
    }
  }
  return total;
}

long RedisSentinel::EvalShaCalls(int port) const {
  return EvalShaCallsIn(Cli(port, {"INFO", "commandstats"}));
}

bool RedisSentinel::Failover() {
  return SentinelCli(0, {"SENTINEL", "FAILOVER", setup_.master_name}) == "OK";
}

std::optional<int> RedisSentinel::WaitForNewMaster(int old_port,
                                                   std::chrono::milliseconds timeout) {
  const auto until = Steady::now() + timeout;
  while (Steady::now() < until) {
    std::optional<int> agreed;
    bool all = true;
    for (size_t i = 0; i < sentinel_ports_.size() && all; ++i) {
      const auto port = MasterPort(i);
      all = port.has_value() && *port != old_port && (!agreed || *agreed == *port);
      agreed = port;
    }
    if (all && agreed && RoleOf(*agreed) == "master") return agreed;
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

}  // namespace sluice::testing
