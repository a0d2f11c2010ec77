#include "tls/pem_file.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::tls {
namespace {

Status SystemError(std::string_view what) {
  return Status::Internal("tls: cannot " + std::string(what) + ": " + std::strerror(errno));
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};

// The key, then the certificate and its chain, to `out`; false if the context holds no pair.
bool WriteIdentity(SSL_CTX* context, BIO* out) {
  X509* certificate = SSL_CTX_get0_certificate(context);
  EVP_PKEY* key = SSL_CTX_get0_privatekey(context);
  if (certificate == nullptr || key == nullptr ||
      PEM_write_bio_PrivateKey(out, key, nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_X509(out, certificate) != 1) {
    return false;
  }
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get_extra_chain_certs(context, &chain);
  for (int i = 0; chain != nullptr && i < sk_X509_num(chain); ++i) {
    if (PEM_write_bio_X509(out, sk_X509_value(chain, i)) != 1) return false;
  }
  return true;
}

// The certificates of the context's verification store, to `out`; false if it holds none.
bool WriteAuthorities(SSL_CTX* context, BIO* out) {
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(context));
  int written = 0;
  for (int i = 0; objects != nullptr && i < sk_X509_OBJECT_num(objects); ++i) {
    X509* certificate = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i));
    if (certificate == nullptr) continue;  // a revocation list
    if (PEM_write_bio_X509(out, certificate) != 1) return false;
    ++written;
  }
  return written > 0;
}

// The part as PEM; empty if the context holds none of it or OpenSSL cannot write it.
std::string PartPem(PemFile::Part part, SSL_CTX* context) {
  std::unique_ptr<BIO, BioFree> out(BIO_new(BIO_s_mem()));
  if (!out) return {};
  const bool written = part == PemFile::Part::kIdentity ? WriteIdentity(context, out.get())
                                                        : WriteAuthorities(context, out.get());
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  std::string pem = written ? std::string(data, static_cast<size_t>(size)) : std::string();
  OPENSSL_cleanse(data, static_cast<size_t>(size));
  return pem;
}

const char* FileName(PemFile::Part part) {
  return part == PemFile::Part::kIdentity ? "sluice-tls-identity" : "sluice-tls-authorities";
}

bool WriteBytes(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<PemFile>> PemFile::Create(Part part) {
  const int fd = ::memfd_create(FileName(part), MFD_CLOEXEC);
  if (fd < 0) return SystemError("make an in-memory file");
  return std::unique_ptr<PemFile>(new PemFile(part, fd, "/proc/self/fd/" + std::to_string(fd)));
}

PemFile::~PemFile() { ::close(fd_); }

// A file's next contents, written aside: closed unless committed.
class PemFile::Staged {
 public:
  Staged(int fd, std::time_t modified) : fd_(fd), modified_(modified) {}
  Staged(Staged&& other) noexcept : fd_(std::exchange(other.fd_, -1)), modified_(other.modified_) {}
  Staged& operator=(Staged&&) = delete;
  ~Staged() {
    if (fd_ >= 0) ::close(fd_);
  }

  int fd() const { return fd_; }
  std::time_t modified() const { return modified_; }

 private:
  int fd_;
  std::time_t modified_;
};

Result<PemFile::Staged> PemFile::Stage(SSL_CTX* context) const {
  std::string pem = PartPem(part_, context);
  if (pem.empty()) {
    return Status::Internal(part_ == Part::kIdentity
                                ? "tls: cannot write the certificate and key as PEM"
                                : "tls: cannot write the client authorities as PEM");
  }
  const int fd = ::memfd_create(FileName(part_), MFD_CLOEXEC);
  if (fd < 0) return SystemError("make an in-memory file");
  Staged staged(fd, std::max(modified_ + 1, std::time(nullptr)));
  const bool written = WriteBytes(fd, pem);
  OPENSSL_cleanse(pem.data(), pem.size());
  const timespec times[2] = {{.tv_sec = staged.modified(), .tv_nsec = 0},
                             {.tv_sec = staged.modified(), .tv_nsec = 0}};
  if (!written || ::futimens(fd, times) != 0) return SystemError("write the in-memory file");
  return staged;
}

// One step: a reader opening path() gets the previous contents or these, never a mix.
Status PemFile::Commit(Staged& staged) {
  if (::dup3(staged.fd(), fd_, O_CLOEXEC) < 0) return SystemError("swap the in-memory file");
  modified_ = staged.modified();
  return Status::Ok();
}

Status PemFile::Write(SSL_CTX* context, std::initializer_list<PemFile*> files) {
  std::vector<Staged> staged;
  staged.reserve(files.size());
  for (PemFile* file : files) {
    auto next = file->Stage(context);
    if (!next.ok()) return next.status();
    staged.push_back(std::move(next).value());
  }
  size_t i = 0;
  for (PemFile* file : files) {
    if (Status committed = file->Commit(staged[i++]); !committed.ok()) return committed;
  }
  return Status::Ok();
}

}  // namespace sluice::tls
