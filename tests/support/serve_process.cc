#include "support/serve_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "support/redis_server.h"

extern char** environ;

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;

std::string g_sluice;  // the binary under test

}  // namespace

const std::string& SluiceBinary() { return g_sluice; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  std::ofstream(temp) << text;
  std::filesystem::rename(temp, path);
}

TempDir::TempDir() {
  std::string pattern = ::testing::TempDir() + "sluice_serve_XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

Process::Process(std::vector<std::string> args, std::string log_path, const std::string& cwd)
    : log_path_(std::move(log_path)) {
  Spawn(g_sluice, std::move(args), cwd, false);
}

std::unique_ptr<Process> Process::OfProgram(const std::string& program,
                                            std::vector<std::string> args, std::string log_path) {
  std::unique_ptr<Process> process(new Process(std::move(log_path)));
  process->Spawn(program, std::move(args), "", true);
  return process;
}

void Process::Spawn(const std::string& program, std::vector<std::string> args,
                    const std::string& cwd, bool own_group) {
  args.insert(args.begin(), program);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (own_group) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  if (posix_spawn(&pid_, program.c_str(), &actions, &attributes, argv.data(), environ) != 0) {
    pid_ = -1;
  }
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
}

Process::~Process() {
  if (pid_ > 0 && !exit_status_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Process::Signal(int signal) const { kill(pid_, signal); }

std::optional<int> Process::WaitExit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exit_status_) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (r < 0 || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
  return exit_status_;
}

std::optional<int> Process::Stop(std::chrono::milliseconds timeout) {
  Signal(SIGTERM);
  return WaitExit(timeout);
}

bool Process::WaitForLog(std::string_view text, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Log().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

int64_t MetricValue(std::string_view exposition, std::string_view series) {
  const std::string needle = "\n" + std::string(series) + " ";
  const size_t at = exposition.find(needle);
  if (at == std::string_view::npos) return -1;
  return std::stoll(std::string(exposition.substr(at + needle.size(), 32)));
}

httplib::Client LocalClient(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5s);
  client.set_read_timeout(5s);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // else a request's body waits for the ACK of its headers
  return client;
}

bool WaitUntilUp(int port, Process& process) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  httplib::Client client = LocalClient(port);
  while (std::chrono::steady_clock::now() < deadline && process.started() && !process.Exited()) {
    if (auto r = client.Get("/healthz"); r && r->status == 200) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

Service::Service(const std::string& rules_yaml, std::string store_url, std::string store_fields,
                 std::vector<std::string> flags)
    : config_(dir_.File("sluice.yaml")),
      store_url_(std::move(store_url)),
      store_fields_(std::move(store_fields)) {
  WriteConfig(rules_yaml);
  // Another test's server may take the port between its choice and the bind: the process then
  // exits saying it cannot listen, and that server may answer /healthz meanwhile, so the
  // process's own log must say it serves on the port.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = FreeLoopbackPort();
    const std::string address = "127.0.0.1:" + std::to_string(port_);
    std::vector<std::string> args = {"serve", "--config", config_, "--listen", address};
    args.insert(args.end(), flags.begin(), flags.end());
    process_ = std::make_unique<Process>(std::move(args), dir_.File("serve.log"));
    up_ = WaitUntilUp(port_, *process_) && process_->WaitForLog("serving on " + address);
    if (up_ || process_->Log().find("cannot listen on " + address) == std::string::npos) return;
  }
}

void Service::WriteConfig(const std::string& rules_yaml) const {
  WriteFile(config_, "store: {url: \"" + store_url_ + "\"" +
                         (store_fields_.empty() ? "" : ", " + store_fields_) + "}\n" + rules_yaml);
}

}  // namespace sluice::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PATH_TO_SLUICE_BINARY [gtest flags]\n";
    return 2;
  }
  // Absolute: some tests run it in another directory.
  sluice::testing::g_sluice = std::filesystem::absolute(argv[1]).string();
  return RUN_ALL_TESTS();
}
