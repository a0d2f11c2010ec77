// A real redis-server for integration tests: started on a free loopback port with persistence
// off, in a temporary directory, and stopped (SIGKILL after a grace period) when destroyed.
// Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::testing {

// A TLS port's files, beside the plain port (which the readiness probe and Cli use).
struct RedisTlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;        // the authority clients' certificates must chain to
  bool auth_clients = false;  // tls-auth-clients yes: a client certificate is required
};

class RedisServer {
 public:
  // Starts redis-server with `extra_args` ("--maxclients", "10", ...) and waits (up to 5 s) until
  // it answers PING (itself, not another test's server on the same port). Returns null, after
  // printing why, if it cannot.
  static std::unique_ptr<RedisServer> Start(std::vector<std::string> extra_args = {});
  // The same with a TLS port too (redis-server --tls-port), on a free port of its own.
  static std::unique_ptr<RedisServer> StartTls(const RedisTlsFiles& tls,
                                               std::vector<std::string> extra_args = {});
  ~RedisServer();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const;  // redis://127.0.0.1:PORT
  int tls_port() const { return tls_port_; }
  std::string tls_url() const;  // rediss://127.0.0.1:TLS_PORT

  // Runs a command through redis-cli and returns its raw output (trailing newline removed).
  std::string Cli(const std::vector<std::string>& args) const;

  void Kill();     // SIGKILL, and reap it
  bool Restart();  // start again on the same port after Kill()
  void Pause();    // SIGSTOP: a hung server
  void Resume();   // SIGCONT

 private:
  RedisServer() = default;
  static std::unique_ptr<RedisServer> Start(std::vector<std::string> extra_args, bool tls);
  // Starts it on port_ and waits until it answers; false if another process answers there.
  bool Launch();
  pid_t AnsweringProcess() const;  // the process_id of INFO server on port_; -1 if unknown

  int port_ = 0;
  int tls_port_ = 0;  // none when 0
  pid_t pid_ = -1;
  std::string dir_;
  std::vector<std::string> extra_args_;
};

// Runs a command through redis-cli against 127.0.0.1:`port`, logged in with `password` when
// given, and returns its raw output (trailing newline removed).
std::string RedisCli(int port, const std::vector<std::string>& args,
                     const std::string& password = "");

// A TCP port on 127.0.0.1 that was free a moment ago, drawn at random below the ports the kernel
// gives outgoing connections.
int FreeLoopbackPort();

}  // namespace sluice::testing
