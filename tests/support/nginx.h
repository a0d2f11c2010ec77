// A real nginx (Debian's package) for tests: started in the foreground as a single process
// (daemon off, master_process off) with a config of its own in a temporary directory, which is
// also its prefix and holds its pid file, error log and temporary files: nothing under /etc or
// /var, no root needed. Killed when destroyed. Not thread-safe; one owner.
#pragma once

#include <memory>
#include <string>

#include "support/serve_process.h"

namespace sluice::testing {

class Nginx {
 public:
  // Runs `program` (the nginx binary) with `http` as its http block's directives (upstreams,
  // servers) and waits, up to 10 s, until it accepts connections on 127.0.0.1:`port` (one of its
  // servers'). Returns null, after printing its error log, if it does not.
  static std::unique_ptr<Nginx> Start(const std::string& program, const std::string& http,
                                      int port);
  ~Nginx();

  std::string ErrorLog() const { return ReadFile(dir_.File("error.log")); }

 private:
  Nginx() = default;

  TempDir dir_;
  std::unique_ptr<Process> process_;
};

}  // namespace sluice::testing
