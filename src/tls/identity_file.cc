#include "tls/identity_file.h"

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

namespace sluice::tls {
namespace {

Status SystemError(std::string_view what) {
  return Status::Internal("tls: cannot " + std::string(what) + ": " + std::strerror(errno));
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};

// The key, then the certificate and its chain, as PEM; empty if OpenSSL cannot write them.
std::string IdentityPem(SSL_CTX* context) {
  X509* certificate = SSL_CTX_get0_certificate(context);
  EVP_PKEY* key = SSL_CTX_get0_privatekey(context);
  if (certificate == nullptr || key == nullptr) return {};
  std::unique_ptr<BIO, BioFree> out(BIO_new(BIO_s_mem()));
  if (!out ||
      PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_X509(out.get(), certificate) != 1) {
    return {};
  }
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get_extra_chain_certs(context, &chain);
  for (int i = 0; chain != nullptr && i < sk_X509_num(chain); ++i) {
    if (PEM_write_bio_X509(out.get(), sk_X509_value(chain, i)) != 1) return {};
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  std::string pem(data, static_cast<size_t>(size));
  OPENSSL_cleanse(data, static_cast<size_t>(size));
  return pem;
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<IdentityFile>> IdentityFile::Create() {
  const int fd = ::memfd_create("sluice-tls-identity", MFD_CLOEXEC);
  if (fd < 0) return SystemError("make an in-memory file");
  return std::unique_ptr<IdentityFile>(new IdentityFile(fd, "/proc/self/fd/" + std::to_string(fd)));
}

IdentityFile::~IdentityFile() { ::close(fd_); }

Status IdentityFile::Write(SSL_CTX* context) {
  std::string pem = IdentityPem(context);
  if (pem.empty()) return Status::Internal("tls: cannot write the certificate and key as PEM");
  const int next = ::memfd_create("sluice-tls-identity", MFD_CLOEXEC);
  if (next < 0) return SystemError("make an in-memory file");
  const bool written = WriteAll(next, pem);
  OPENSSL_cleanse(pem.data(), pem.size());
  modified_ = std::max(modified_ + 1, std::time(nullptr));
  const timespec times[2] = {{.tv_sec = modified_, .tv_nsec = 0},
                             {.tv_sec = modified_, .tv_nsec = 0}};
  if (!written || ::futimens(next, times) != 0) {
    const Status status = SystemError("write the in-memory file");
    ::close(next);
    return status;
  }
  // One step: a reader opening path() gets the previous contents or these, never a mix.
  if (::dup3(next, fd_, O_CLOEXEC) < 0) {
    const Status status = SystemError("swap the in-memory file");
    ::close(next);
    return status;
  }
  ::close(next);
  return Status::Ok();
}

}  // namespace sluice::tls
