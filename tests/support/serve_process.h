// The real `sluice serve` binary for end-to-end tests: a temporary directory, a process of the
// binary with its stdout and stderr in a log file, a wait until it answers /healthz, an HTTP
// client to it, and a Service (a config written from rules, the process on a free loopback port,
// up). Linking this library gives the test program its main(), whose first argument is the path
// of the binary under test. Not thread-safe: each object has one owner; only LocalClient(),
// Service::Client() and SluiceBinary() may be called from any thread.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::testing {

// The absolute path of the binary under test, as main() was given it.
const std::string& SluiceBinary();

std::string ReadFile(const std::string& path);

// Writes through a temporary file and a rename, as an editor or a deploy would, so a reload
// never reads a half-written file.
void WriteFile(const std::string& path, const std::string& text);

// A directory under the test temporary directory, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

// A process of the binary under test, with stdout and stderr going to a log file, run in `cwd`
// (empty: this process's working directory). Killed (SIGKILL) when destroyed if still running.
class Process {
 public:
  Process(std::vector<std::string> args, std::string log_path, const std::string& cwd = "");
  // A process of another program (its path), e.g. a browser's driver, in this process's working
  // directory and in a process group of its own, which what it starts joins: pid() is the group's
  // id, for signalling them all.
  static std::unique_ptr<Process> OfProgram(const std::string& program,
                                            std::vector<std::string> args, std::string log_path);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  std::string Log() const { return ReadFile(log_path_); }

  // The exit status (128 + the signal if a signal ended it) once the process has exited within
  // `timeout`; nullopt otherwise.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  bool Exited() { return WaitExit(std::chrono::milliseconds(0)).has_value(); }
  // SIGTERM, and the exit status if it exits within `timeout`.
  std::optional<int> Stop(std::chrono::milliseconds timeout);

  // Polls the log until it contains `text` (bounded by `timeout`).
  bool WaitForLog(std::string_view text,
                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

 private:
  explicit Process(std::string log_path) : log_path_(std::move(log_path)) {}
  void Spawn(const std::string& program, std::vector<std::string> args, const std::string& cwd,
             bool own_group);

  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

// The value of the line of `series` (a name and its labels, as written) in a /metrics text, or
// -1 if it has none.
int64_t MetricValue(std::string_view exposition, std::string_view series);

// A keep-alive client to 127.0.0.1:`port`, with 5 s timeouts and TCP_NODELAY.
httplib::Client LocalClient(int port);

// Polls /healthz until the service on `port` answers (true), or `process` exits, or 10 s pass.
bool WaitUntilUp(int port, Process& process);

// `sluice serve` on a free loopback port with a config of the given rules, up and answering
// /healthz (or not, as up() says, the log telling why).
class Service {
 public:
  // `store_fields`: more fields of the config's store mapping, e.g. "instances: 2". `flags`: the
  // command line's after --config and --listen.
  explicit Service(const std::string& rules_yaml, std::string store_url = "memory://",
                   std::string store_fields = "",
                   std::vector<std::string> flags = {"--io-threads", "2"});

  // Rewrites the config with these rules and the store given at construction.
  void WriteConfig(const std::string& rules_yaml) const;

  bool up() const { return up_; }
  int port() const { return port_; }
  const std::string& config_path() const { return config_; }
  Process& process() { return *process_; }

  httplib::Client Client() const { return LocalClient(port_); }

 private:
  TempDir dir_;
  int port_ = 0;
  std::string config_;
  std::string store_url_;
  std::string store_fields_;
  std::unique_ptr<Process> process_;
  bool up_ = false;
};

}  // namespace sluice::testing
