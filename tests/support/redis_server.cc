#include "support/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace sluice::testing {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// The port a socket bound to 127.0.0.1:`port` got (0: any free one), with the socket closed
// again; 0 if the bind failed.
int Bind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  return bound ? ntohs(addr.sin_port) : 0;
}

// The lowest port of the kernel's ephemeral range; 0 if unknown.
int EphemeralPortsFrom() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int lowest = 0;
  range >> lowest;
  return lowest;
}

}  // namespace

int FreeLoopbackPort() {
  // Drawn below the kernel's ephemeral range, which outgoing connections take their local ports
  // from (a test's many clients would otherwise take a port between its choice and its bind),
  // and at random, so that tests running in parallel rarely draw the same. A Redis Cluster node
  // also binds the port + 10000 for its bus, which must stay below that range too.
  constexpr int kLowest = 10000, kHighest = 19999, kBusOffset = 10000;
  if (EphemeralPortsFrom() > kHighest + kBusOffset) {
    thread_local std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> draw(kLowest, kHighest);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int port = draw(rng);
      if (Bind(port) == port) return port;
    }
  }
  return Bind(0);  // the kernel's choice
}

std::unique_ptr<RedisServer> RedisServer::StartTls(const RedisTlsFiles& tls,
                                                   std::vector<std::string> extra_args) {
  std::vector<std::string> args = {
      "--tls-cert-file",    tls.cert_file, "--tls-key-file",     tls.key_file,
      "--tls-ca-cert-file", tls.ca_file,   "--tls-auth-clients", tls.auth_clients ? "yes" : "no"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return Start(std::move(args), /*tls=*/true);
}

std::unique_ptr<RedisServer> RedisServer::Start(std::vector<std::string> extra_args) {
  return Start(std::move(extra_args), /*tls=*/false);
}

std::unique_ptr<RedisServer> RedisServer::Start(std::vector<std::string> extra_args, bool tls) {
  std::unique_ptr<RedisServer> server(new RedisServer());
  server->extra_args_ = std::move(extra_args);
  char dir_template[] = "/tmp/sluice-redis-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return nullptr;
  }
  server->dir_ = dir_template;
  for (int attempt = 0; attempt < 5; ++attempt) {
    server->port_ = FreeLoopbackPort();
    server->tls_port_ = tls ? FreeLoopbackPort() : 0;
    if (server->port_ != 0 && server->tls_port_ != server->port_ && server->Launch()) {
      return server;
    }
  }
  std::fprintf(stderr, "RedisServer: could not start redis-server (is it installed?)\n");
  return nullptr;
}

bool RedisServer::Launch() {
  std::vector<std::string> args = {"redis-server",
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir_,
                                   "--daemonize",
                                   "no",
                                   "--loglevel",
                                   "warning",
                                   "--logfile",
                                   dir_ + "/redis.log"};
  if (tls_port_ != 0) {
    args.insert(args.end(), {"--tls-port", std::to_string(tls_port_)});
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = fork();
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  if (pid_ < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken, or no redis-server
      pid_ = -1;
      return false;
    }
    const std::string pong = Cli({"PING"});
    if (pong.starts_with("NOAUTH")) return true;  // up, with a password
    if (pong == "PONG") {
      // The port was free when chosen, but a server of another test may have taken it since:
      // then ours fails to bind, and that one answers.
      if (AnsweringProcess() == pid_) return true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill();
  return false;
}

pid_t RedisServer::AnsweringProcess() const {
  const std::string info = Cli({"INFO", "server"});
  const size_t at = info.find("process_id:");
  if (at == std::string::npos) return -1;
  return static_cast<pid_t>(std::strtol(info.c_str() + at + 11, nullptr, 10));
}

RedisServer::~RedisServer() {
  Resume();
  Kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisServer::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

std::string RedisServer::tls_url() const {
  return "rediss://127.0.0.1:" + std::to_string(tls_port_);
}

std::string RedisServer::Cli(const std::vector<std::string>& args) const {
  return RedisCli(port_, args);
}

std::string RedisCli(int port, const std::vector<std::string>& args, const std::string& password) {
  std::string command = "redis-cli -h 127.0.0.1 -p " + std::to_string(port);
  if (!password.empty()) command += " --no-auth-warning -a " + ShellQuote(password);
  for (const auto& a : args) command += " " + ShellQuote(a);
  command += " 2>&1";
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 4096> buffer;
    size_t n;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
    pclose(pipe);
  }
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  return output;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

bool RedisServer::Restart() {
  Kill();
  return Launch();
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

}  // namespace sluice::testing
