// Real reverse proxies for tests, from their Debian packages: nginx, and Caddy. Each is started
// in the foreground as one process with a config of its own in a temporary directory, which also
// holds everything it writes (nginx's prefix: pid file, error log, temporary files; Caddy's data
// and config homes): nothing under /etc or /var, no root needed. Killed when destroyed. Not
// thread-safe; one owner.
#pragma once

#include <memory>
#include <string>

#include "support/serve_process.h"

namespace sluice::testing {

class ReverseProxy {
 public:
  // Runs nginx (`program`) with `http` as its http block's directives (upstreams, servers),
  // as a single process (daemon off, master_process off).
  static std::unique_ptr<ReverseProxy> StartNginx(const std::string& program,
                                                  const std::string& http, int port);
  // Runs Caddy (`program`) with `caddyfile`.
  static std::unique_ptr<ReverseProxy> StartCaddy(const std::string& program,
                                                  const std::string& caddyfile, int port);
  // Both wait, up to 10 s, until the proxy accepts connections on 127.0.0.1:`port` (one of its
  // servers'), and return null, after printing its log, if it does not.

  ~ReverseProxy();

  // Its output, and for nginx its error log.
  std::string Log() const;

 private:
  ReverseProxy() = default;
  static std::unique_ptr<ReverseProxy> WaitUntilUp(std::unique_ptr<ReverseProxy> proxy, int port);

  TempDir dir_;
  std::unique_ptr<Process> process_;
};

}  // namespace sluice::testing
