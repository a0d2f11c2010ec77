#include "support/reverse_proxy.h"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

namespace sluice::testing {

using namespace std::chrono_literals;

std::unique_ptr<ReverseProxy> ReverseProxy::StartNginx(const std::string& program,
                                                       const std::string& http, int port) {
  std::unique_ptr<ReverseProxy> nginx(new ReverseProxy());
  const TempDir& dir = nginx->dir_;
  // Debian's build puts its temporary files under /var/lib/nginx: each is moved here.
  std::string temp_paths;
  for (const char* kind : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
    temp_paths += std::string("  ") + kind + "_temp_path " + dir.File(kind) + ";\n";
  }
  const std::string config = dir.File("nginx.conf");
  WriteFile(config, "daemon off;\nmaster_process off;\nworker_processes 1;\npid " +
                        dir.File("nginx.pid") + ";\nerror_log " + dir.File("error.log") +
                        " info;\nevents { worker_connections 1024; }\nhttp {\n  access_log off;\n" +
                        temp_paths + http + "\n}\n");
  nginx->process_ = Process::OfProgram(
      program, {"-p", dir.path() + "/", "-c", config, "-e", dir.File("error.log")},
      dir.File("proxy.log"));
  return WaitUntilUp(std::move(nginx), port);
}

std::unique_ptr<ReverseProxy> ReverseProxy::StartCaddy(const std::string& program,
                                                       const std::string& caddyfile, int port) {
  std::unique_ptr<ReverseProxy> caddy(new ReverseProxy());
  const TempDir& dir = caddy->dir_;
  const std::string config = dir.File("Caddyfile");
  WriteFile(config, caddyfile);
  // Where Caddy keeps its data and its last config: the spawned process inherits these.
  for (const char* home : {"XDG_DATA_HOME", "XDG_CONFIG_HOME"}) {
    std::filesystem::create_directory(dir.File(home));
    setenv(home, dir.File(home).c_str(), 1);
  }
  caddy->process_ = Process::OfProgram(
      program, {"run", "--config", config, "--adapter", "caddyfile"}, dir.File("proxy.log"));
  return WaitUntilUp(std::move(caddy), port);
}

std::unique_ptr<ReverseProxy> ReverseProxy::WaitUntilUp(std::unique_ptr<ReverseProxy> proxy,
                                                        int port) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  httplib::Client client = LocalClient(port);
  while (proxy->process_->started() && !proxy->process_->Exited()) {
    if (client.Get("/")) return proxy;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  std::cerr << "the proxy did not start:\n" << proxy->Log() << "\n";
  return nullptr;
}

ReverseProxy::~ReverseProxy() {
  // A fast stop for both (nginx and Caddy); the Process sends SIGKILL if it is still there.
  if (process_->started() && !process_->Exited()) {
    process_->Signal(SIGTERM);
    process_->WaitExit(5s);
  }
}

std::string ReverseProxy::Log() const { return process_->Log() + ReadFile(dir_.File("error.log")); }

}  // namespace sluice::testing
