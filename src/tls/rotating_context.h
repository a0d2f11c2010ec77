// A server's TLS context kept current as its files rotate (cert-manager, certbot): Reload builds
// a new context from the files and swaps it in; WatchFiles does so whenever a file's identity
// (device, inode, size, modification time) changes. New connections take Current(); established
// ones keep the context they were accepted with. A pair caught half written (a key that is not the
// certificate's) or an unreadable file is not taken: the previous context stays, and the failure
// is logged once per change of the files. A listener given at Load sees each context before it
// becomes current, and may refuse it: a server outside Asio (gRPC's, tls/pem_file.h) is kept
// serving the same certificate.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <sys/stat.h>

#include <array>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "base/mutex.h"
#include "sluice/status.h"
#include "tls/server_context.h"
#include "tls/server_files.h"

namespace sluice::tls {

class RotatingContext {
 public:
  // Called with each context built, the first included, under the object's lock; a context it
  // refuses (the status it returns) does not become current.
  using Listener = std::function<Status(boost::asio::ssl::context&)>;

  // INVALID_ARGUMENT, naming the field and the file, if the files do not make a context now; the
  // listener's status if it refuses the first.
  static Result<std::unique_ptr<RotatingContext>> Load(ServerFiles files, Listener listener = {});
  ~RotatingContext();

  std::shared_ptr<boost::asio::ssl::context> Current() const;

  // Builds the context from the files again; on failure the previous one stays and the error is
  // returned (and logged).
  Status Reload();

  // Polls the files every `interval` on a thread of its own, reloading when they change, until
  // destroyed. Once.
  void WatchFiles(std::chrono::milliseconds interval = std::chrono::seconds(1));

  // Contexts built since Load (the first not counted).
  uint64_t reloads() const;

 private:
  // What identifies a file's content: changes when it is rewritten or replaced. Zero when the
  // file cannot be read.
  struct FileStamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    int64_t modified_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  using Stamp = std::array<FileStamp, 3>;  // cert, key, client CA

  RotatingContext(ServerFiles files, Listener listener)
      : files_(std::move(files)), listener_(std::move(listener)) {}
  Stamp StampFiles() const;
  // Reloads if the files changed since the last attempt.
  void Poll();

  const ServerFiles files_;
  const Listener listener_;
  mutable base::Mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_ SLUICE_GUARDED_BY(mu_);
  Stamp attempted_ SLUICE_GUARDED_BY(mu_){};  // the files' stamp at the last build attempted
  uint64_t reloads_ SLUICE_GUARDED_BY(mu_) = 0;
  bool stopping_ SLUICE_GUARDED_BY(mu_) = false;
  std::condition_variable stop_;
  std::thread watcher_;
};

}  // namespace sluice::tls
