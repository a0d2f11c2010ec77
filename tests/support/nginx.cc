#include "support/nginx.h"

#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

namespace sluice::testing {

using namespace std::chrono_literals;

std::unique_ptr<Nginx> Nginx::Start(const std::string& program, const std::string& http, int port) {
  std::unique_ptr<Nginx> nginx(new Nginx());
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
      dir.File("nginx.out"));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  httplib::Client client = LocalClient(port);
  while (nginx->process_->started() && !nginx->process_->Exited()) {
    if (client.Get("/")) return nginx;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  std::cerr << "nginx did not start:\n" << nginx->process_->Log() << nginx->ErrorLog() << "\n";
  return nullptr;
}

Nginx::~Nginx() {
  // SIGQUIT: a graceful stop; the Process sends SIGKILL if it is still there.
  if (process_->started() && !process_->Exited()) {
    process_->Signal(SIGQUIT);
    process_->WaitExit(5s);
  }
}

}  // namespace sluice::testing
