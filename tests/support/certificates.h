// Certificates for TLS tests, made at test time by the `openssl` command line in a temporary
// directory: a certificate authority, and certificates it signs for given names, valid now or
// already expired. Each authority is its own; a certificate from one fails verification against
// another. Not thread-safe; one owner. The directory is removed when the authority is destroyed.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sluice::testing {

struct IssuedCertificate {
  std::string cert_file;  // PEM
  std::string key_file;   // PEM, unencrypted
};

class CertificateAuthority {
 public:
  // A new authority named `name` (its subject's CN); null, after printing why, if openssl fails.
  static std::unique_ptr<CertificateAuthority> Create(const std::string& name = "sluice test CA");
  ~CertificateAuthority();

  const std::string& ca_file() const { return ca_file_; }
  const std::string& dir() const { return dir_; }

  // A certificate for `common_name` with the subject alternative names `sans` ("DNS:localhost",
  // "IP:127.0.0.1", "URI:spiffe://..."), usable by a server and by a client; valid for a year,
  // or expired a year ago when `expired`. Each gets its own serial number. Empty files if openssl
  // fails (the failure is printed).
  IssuedCertificate Issue(const std::string& common_name, const std::vector<std::string>& sans,
                          bool expired = false);

 private:
  CertificateAuthority() = default;

  std::string dir_;
  std::string ca_file_;
  std::string ca_key_file_;
  int issued_ = 0;
};

// The serial number of a PEM certificate file, as `openssl x509 -serial` prints it (hex, upper
// case, no "serial="); empty if it cannot be read.
std::string CertificateSerial(const std::string& cert_file);

}  // namespace sluice::testing
