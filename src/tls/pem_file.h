// Part of a TLS server context as PEM in a file held in memory (memfd) and read by path
// (/proc/self/fd/N), for a library that reads its certificates from files on its own schedule
// (gRPC's FileWatcherCertificateProvider). A context's identity (its private key, then its
// certificate chain) goes in one file, the authorities it verifies clients against in another.
// The file only ever holds what a context took whole (tls/rotating_context.h matched the key to
// the certificate and read every authority) and is swapped whole at once: a reader opening the
// path twice (the key, then the certificate) gets the same contents both times, or contents
// swapped in between, never a file caught half written. Each swap also moves the file's
// modification time on by a second at least, so that a reader comparing modification times
// before and after reading (as gRPC does, in whole seconds) sees the swap and reads again. A key
// never reaches a disk, and the file is gone with the process.
//
// Thread safety: path() may be called concurrently; Write calls on one file must not overlap.
#pragma once

#include <openssl/ssl.h>

#include <ctime>
#include <initializer_list>
#include <memory>
#include <string>

#include "sluice/status.h"

namespace sluice::tls {

class PemFile {
 public:
  enum class Part {
    kIdentity,     // the private key, then the certificate and its chain
    kAuthorities,  // the certificates client certificates are verified against
  };

  // An empty file for `part`; INTERNAL if the system refuses one.
  static Result<std::unique_ptr<PemFile>> Create(Part part);
  ~PemFile();
  PemFile(const PemFile&) = delete;
  PemFile& operator=(const PemFile&) = delete;

  // Where it is read.
  const std::string& path() const { return path_; }

  // Replaces each file's contents with its part of `context`, all or none: every file is written
  // aside first, and only when all are written are they swapped in. INTERNAL, every file
  // unchanged, if the context holds none of a part or a file cannot be written. (A reader of
  // both files, such as gRPC, never pairs a new identity with the old authorities because the
  // second file could not be written.)
  static Status Write(SSL_CTX* context, std::initializer_list<PemFile*> files);

 private:
  class Staged;

  PemFile(Part part, int fd, std::string path) : part_(part), fd_(fd), path_(std::move(path)) {}

  Result<Staged> Stage(SSL_CTX* context) const;
  Status Commit(Staged& staged);

  const Part part_;
  const int fd_;
  const std::string path_;
  std::time_t modified_ = 0;  // of the contents last written
};

}  // namespace sluice::tls
