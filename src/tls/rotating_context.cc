#include "tls/rotating_context.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace sluice::tls {
namespace {

Status AsStatus(const ContextError& error) {
  return Status::InvalidArgument(error.field + ": " + error.message);
}

}  // namespace

Result<std::unique_ptr<RotatingContext>> RotatingContext::Load(ServerFiles files,
                                                               Listener listener) {
  std::unique_ptr<RotatingContext> rotating(
      new RotatingContext(std::move(files), std::move(listener)));
  const Stamp stamp = rotating->StampFiles();
  ContextError error;
  auto context = LoadServerContext(rotating->files_, error);
  if (!context) return AsStatus(error);
  base::MutexLock lock(rotating->mu_);
  if (rotating->listener_) {
    if (Status s = rotating->listener_(*context); !s.ok()) return s;
  }
  rotating->current_ = std::move(context);
  rotating->attempted_ = stamp;
  return rotating;
}

RotatingContext::~RotatingContext() {
  {
    base::MutexLock lock(mu_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::shared_ptr<boost::asio::ssl::context> RotatingContext::Current() const {
  base::MutexLock lock(mu_);
  return current_;
}

uint64_t RotatingContext::reloads() const {
  base::MutexLock lock(mu_);
  return reloads_;
}

Status RotatingContext::Reload() {
  // Stamped before reading: a change made while reading is seen by the next poll.
  const Stamp stamp = StampFiles();
  ContextError error;
  auto context = LoadServerContext(files_, error);
  base::MutexLock lock(mu_);
  attempted_ = stamp;
  Status status = context ? Status::Ok() : AsStatus(error);
  if (status.ok() && listener_) status = listener_(*context);
  if (!status.ok()) {
    spdlog::error("tls: keeping the current certificate: {}", status.message());
    return status;
  }
  current_ = std::move(context);
  ++reloads_;
  spdlog::info("tls: certificate reloaded from {}", files_.cert_file);
  return Status::Ok();
}

void RotatingContext::WatchFiles(std::chrono::milliseconds interval) {
  watcher_ = std::thread([this, interval] {
    base::MutexLock lock(mu_);
    while (!stopping_) {
      lock.WaitUntil(stop_, std::chrono::steady_clock::now() + interval);
      if (stopping_) break;
      lock.Unlock();
      Poll();
      lock.Lock();
    }
  });
}

void RotatingContext::Poll() {
  const Stamp stamp = StampFiles();
  {
    base::MutexLock lock(mu_);
    if (stamp == attempted_) return;
  }
  (void)Reload();  // logged either way
}

RotatingContext::Stamp RotatingContext::StampFiles() const {
  Stamp stamp{};
  const std::string* paths[] = {&files_.cert_file, &files_.key_file, &files_.client_ca_file};
  for (size_t i = 0; i < stamp.size(); ++i) {
    struct stat info {};
    if (paths[i]->empty() || ::stat(paths[i]->c_str(), &info) != 0) continue;
    stamp[i] = {info.st_dev, info.st_ino, info.st_size,
                int64_t{info.st_mtim.tv_sec} * 1'000'000'000 + info.st_mtim.tv_nsec};
  }
  return stamp;
}

}  // namespace sluice::tls
