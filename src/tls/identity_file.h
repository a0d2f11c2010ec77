// A server's certificate chain and private key, as PEM in one file held in memory (memfd) and
// read by path (/proc/self/fd/N), for a library that reads its identity from files on its own
// schedule (gRPC's FileWatcherCertificateProvider). The file only ever holds a pair that belongs
// together: Write takes them from a context that matched them (tls/rotating_context.h) and swaps
// the whole file at once, so a reader opening the path twice (the key, then the certificate) gets
// the same pair both times, or a pair swapped in between. Each swap also moves the file's
// modification time on by a second at least, so that a reader comparing modification times
// before and after reading (as gRPC does, in whole seconds) sees the swap and reads again. The
// key never reaches a disk, and the file is gone with the process.
//
// Thread safety: path() may be called concurrently; Write calls must not overlap.
#pragma once

#include <openssl/ssl.h>

#include <ctime>
#include <memory>
#include <string>

#include "sluice/status.h"

namespace sluice::tls {

class IdentityFile {
 public:
  // An empty file; INTERNAL if the system refuses one.
  static Result<std::unique_ptr<IdentityFile>> Create();
  ~IdentityFile();
  IdentityFile(const IdentityFile&) = delete;
  IdentityFile& operator=(const IdentityFile&) = delete;

  // Where it is read: the key and the certificate chain, both in this one file.
  const std::string& path() const { return path_; }

  // Replaces the file's contents with the private key and certificate chain `context` holds;
  // INTERNAL (the file unchanged) if they cannot be written.
  Status Write(SSL_CTX* context);

 private:
  IdentityFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  const int fd_;
  const std::string path_;
  std::time_t modified_ = 0;  // of the contents last written
};

}  // namespace sluice::tls
