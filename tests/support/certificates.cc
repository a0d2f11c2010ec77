#include "support/certificates.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace sluice::testing {
namespace {

// Runs `command` through the shell, its output discarded unless it fails (its errors go to
// `dir`/openssl.err); true on success.
bool Run(const std::string& dir, const std::string& command) {
  const std::string quiet = command + " >/dev/null 2>" + dir + "/openssl.err";
  if (std::system(quiet.c_str()) == 0) return true;
  std::ifstream error(dir + "/openssl.err");
  std::cerr << "failed: " << command << "\n" << error.rdbuf() << "\n";
  return false;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string CaConfig(const std::string& dir) {
  return "[ca]\ndefault_ca = test_ca\n"
         "[test_ca]\n"
         "database = " +
         dir +
         "/index.txt\n"
         "new_certs_dir = " +
         dir +
         "/issued\n"
         "serial = " +
         dir +
         "/serial\n"
         "default_md = sha256\n"
         "policy = any_name\n"
         "unique_subject = no\n"
         "[any_name]\ncommonName = supplied\n";
}

}  // namespace

std::unique_ptr<CertificateAuthority> CertificateAuthority::Create(const std::string& name) {
  std::unique_ptr<CertificateAuthority> ca(new CertificateAuthority());
  char dir_template[] = "/tmp/sluice-pki-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return nullptr;
  }
  ca->dir_ = dir_template;
  ca->ca_file_ = ca->dir_ + "/ca.pem";
  ca->ca_key_file_ = ca->dir_ + "/ca.key";
  std::filesystem::create_directory(ca->dir_ + "/issued");
  Write(ca->dir_ + "/index.txt", "");
  Write(ca->dir_ + "/serial", "1000\n");
  Write(ca->dir_ + "/ca.cnf", CaConfig(ca->dir_));
  const bool made =
      Run(ca->dir_, "openssl ecparam -name prime256v1 -genkey -noout -out " + ca->ca_key_file_) &&
      Run(ca->dir_, "openssl req -x509 -new -key " + ca->ca_key_file_ + " -out " + ca->ca_file_ +
                        " -days 3650 -subj '/CN=" + name + "'" +
                        " -addext basicConstraints=critical,CA:TRUE" +
                        " -addext keyUsage=critical,keyCertSign,cRLSign");
  if (!made) return nullptr;
  return ca;
}

CertificateAuthority::~CertificateAuthority() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

IssuedCertificate CertificateAuthority::Issue(const std::string& common_name,
                                              const std::vector<std::string>& sans, bool expired) {
  const std::string base = dir_ + "/cert" + std::to_string(++issued_);
  IssuedCertificate issued{base + ".pem", base + ".key"};
  std::string alt_names;
  for (const std::string& san : sans) alt_names += (alt_names.empty() ? "" : ",") + san;
  std::string extensions =
      "basicConstraints = CA:FALSE\n"
      "keyUsage = critical, digitalSignature, keyEncipherment\n"
      "extendedKeyUsage = serverAuth, clientAuth\n";
  if (!alt_names.empty()) extensions += "subjectAltName = " + alt_names + "\n";
  Write(base + ".ext", extensions);
  const std::string validity =
      expired ? " -startdate 20000101000000Z -enddate 20000102000000Z" : " -days 365";
  const bool made =
      Run(dir_, "openssl ecparam -name prime256v1 -genkey -noout -out " + issued.key_file) &&
      Run(dir_, "openssl req -new -key " + issued.key_file + " -out " + base +
                    ".csr -subj '/CN=" + common_name + "'") &&
      Run(dir_, "openssl ca -batch -notext -config " + dir_ + "/ca.cnf -cert " + ca_file_ +
                    " -keyfile " + ca_key_file_ + " -in " + base + ".csr -out " + issued.cert_file +
                    " -extfile " + base + ".ext" + validity);
  if (!made) return {};
  return issued;
}

std::string CertificateSerial(const std::string& cert_file) {
  const std::string command = "openssl x509 -noout -serial -in " + cert_file + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::array<char, 256> line{};
  std::string out;
  while (fgets(line.data(), line.size(), pipe) != nullptr) out += line.data();
  pclose(pipe);
  constexpr std::string_view kPrefix = "serial=";
  if (out.rfind(kPrefix, 0) != 0) return {};
  out.erase(0, kPrefix.size());
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace sluice::testing
