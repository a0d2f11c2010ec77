// The rate limit service as `sluice serve` runs it: envoyproxy/ratelimit's configuration loaded
// from a directory, the Service deciding over the server's store, the gRPC server when an address
// is given, the stats, envoyproxy/ratelimit's POST /json (rls/json_endpoint.h), and reloads: on
// Reload (SIGHUP) and, unless `watch` is off, when a file of the directory has changed and
// settled (polled every second): unchanged across two polls, and not left open by a writer
// (rls/settled_directory.h). A reload that fails to read, parse or combine any file is rejected
// whole; the previous configuration keeps serving.
//
// Thread safety: Reload, the stats and HandleJson may be called from any thread; Shutdown once,
// from the owner's thread, before destruction.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "base/mutex.h"
#include "config/config.h"
#include "rls/grpc_server.h"
#include "rls/service.h"
#include "rls/settled_directory.h"
#include "rls/stats.h"
#include "sluice/store.h"

namespace sluice::rls {

class FrontEnd {
 public:
  // Loads the directory and starts serving gRPC if `config` has grpc_listen, to `callers` only
  // when they are enabled (auth/callers.h). `store` must outlive the front end.
  static Result<std::unique_ptr<FrontEnd>> Start(
      const config::RlsConfig& config, Store& store,
      std::shared_ptr<const auth::CallerTable> callers = nullptr);
  ~FrontEnd();

  // Rereads the directory; the previous configuration stays if it is bad. Rereads the TLS files
  // too (rls/server_tls.h): a certificate without its key is logged, and not taken.
  Status Reload();
  // Who may call on gRPC from now on.
  void SetCallers(std::shared_ptr<const auth::CallerTable> callers) {
    if (grpc_) grpc_->SetCallers(std::move(callers));
  }
  // Stops watching the directory and stops the gRPC server, waiting up to `grace` for its calls.
  void Shutdown(Duration grace);

  int grpc_port() const { return grpc_ ? grpc_->port() : 0; }
  size_t domains() const { return service_.config()->matcher.config().domains.size(); }
  Service& service() { return service_; }
  std::string Exposition() const {
    return grpc_ ? stats_.Exposition() + grpc_->AuthExposition() : stats_.Exposition();
  }

  // Watches the directory through `settled` when it is not null.
  FrontEnd(const config::RlsConfig& config, Store& store,
           std::shared_ptr<const ServiceConfig> loaded, std::unique_ptr<SettledDirectory> settled);

 private:
  // Applies the directory unless `settled` (the watcher's) says it was written while loaded.
  Status Reload(SettledDirectory* settled);
  void Watch();

  const config::RlsConfig config_;
  Stats stats_;
  Service service_;
  std::unique_ptr<GrpcServer> grpc_;
  std::mutex reload_mu_;  // one reload at a time

  base::Mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ SLUICE_GUARDED_BY(watch_mu_) = false;
  std::unique_ptr<SettledDirectory> settled_;  // the watcher's
  std::thread watcher_;
};

}  // namespace sluice::rls
