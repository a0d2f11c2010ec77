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

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::unique_ptr<RedisServer> RedisServer::Start(std::vector<std::string> extra_args) {
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
    if (server->port_ != 0 && server->Launch()) return server;
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

std::string RedisServer::Cli(const std::vector<std::string>& args) const {
  std::string command = "redis-cli -h 127.0.0.1 -p " + std::to_string(port_);
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
