#include "rls/front_end.h"

#include <spdlog/spdlog.h>

#include <string>

#include "rls/server_tls.h"

namespace sluice::rls {
namespace {

constexpr auto kWatchInterval = std::chrono::seconds(1);

Result<std::shared_ptr<const ServiceConfig>> Load(const config::RlsConfig& config) {
  auto parsed = LoadConfigDirectory(config.config_dir);
  if (!parsed.ok()) return parsed.status();
  auto matcher = Matcher::Create(std::move(*parsed));
  if (!matcher.ok()) return matcher.status();
  return std::make_shared<const ServiceConfig>(
      ServiceConfig{.matcher = std::move(*matcher),
                    .options = {.shadow_mode = config.shadow_mode,
                                .quota_mode = config.quota_mode,
                                .x_ratelimit_headers = config.x_ratelimit_headers,
                                .default_on_error = config.on_error}});
}

}  // namespace

Result<std::unique_ptr<FrontEnd>> FrontEnd::Start(
    const config::RlsConfig& config, Store& store,
    std::shared_ptr<const auth::CallerTable> callers) {
  // Seen before loading: whatever is written from now on is reloaded.
  auto settled = config.watch ? std::make_unique<SettledDirectory>(config.config_dir) : nullptr;
  auto loaded = Load(config);
  if (!loaded.ok()) return loaded.status();
  auto front_end =
      std::make_unique<FrontEnd>(config, store, std::move(*loaded), std::move(settled));
  if (config.grpc_listen) {
    front_end->grpc_ = std::make_unique<GrpcServer>(front_end->service_);
    front_end->grpc_->SetCallers(std::move(callers));
    if (Status s = front_end->grpc_->Start(config.grpc_listen->ToString(), config.tls); !s.ok()) {
      return s;
    }
  }
  return front_end;
}

FrontEnd::FrontEnd(const config::RlsConfig& config, Store& store,
                   std::shared_ptr<const ServiceConfig> loaded,
                   std::unique_ptr<SettledDirectory> settled)
    : config_(config), service_(store, stats_, std::move(loaded)), settled_(std::move(settled)) {
  if (settled_) watcher_ = std::thread([this] { Watch(); });
}

FrontEnd::~FrontEnd() { Shutdown(Duration(0)); }

Status FrontEnd::Reload() {
  if (grpc_) (void)grpc_->ReloadTls();  // logged
  return Reload(nullptr);
}

Status FrontEnd::Reload(SettledDirectory* settled) {
  std::lock_guard lock(reload_mu_);
  auto loaded = Load(config_);
  if (settled != nullptr && !settled->Unchanged()) return Status::Ok();  // written meanwhile
  if (!loaded.ok()) {
    spdlog::error("rls: reload rejected, the previous configuration stays in force: {}",
                  loaded.status().message());
    return loaded.status();
  }
  const size_t domains = (*loaded)->matcher.config().domains.size();
  service_.SetConfig(std::move(*loaded));
  spdlog::info("rls: reloaded {} domain(s) from {}", domains, config_.config_dir);
  return Status::Ok();
}

void FrontEnd::Watch() {
  base::MutexLock lock(watch_mu_);
  while (true) {
    const auto next = std::chrono::steady_clock::now() + kWatchInterval;
    while (!stopping_ && std::chrono::steady_clock::now() < next) lock.WaitUntil(watch_cv_, next);
    if (stopping_) return;
    lock.Unlock();
    if (settled_->ChangedAndSettled()) (void)Reload(settled_.get());  // logged either way
    lock.Lock();
  }
}

void FrontEnd::Shutdown(Duration grace) {
  {
    base::MutexLock lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (grpc_) grpc_->Shutdown(grace);
}

}  // namespace sluice::rls
