// The in-memory files gRPC's port reads its certificate and key, and its client authorities, from
// (tls/pem_file.h): each holds its part of the context written, whole; a swap leaves a reader
// that opened it before with the previous contents, whole; and each swap moves its modification
// time on by a second at least, which is how a reader comparing times in whole seconds sees it.
// Files written together (an identity and its authorities) change all or none.
#include "tls/pem_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "support/certificates.h"
#include "tls/server_context.h"

namespace sluice::tls {
namespace {

using ::sluice::testing::CertificateAuthority;
using ::sluice::testing::CertificateSerial;
using ::sluice::testing::IssuedCertificate;

std::shared_ptr<boost::asio::ssl::context> Context(const IssuedCertificate& issued,
                                                   const std::string& client_ca_file = "") {
  ContextError error;
  auto context = LoadServerContext({.cert_file = issued.cert_file,
                                    .key_file = issued.key_file,
                                    .client_ca_file = client_ca_file},
                                   error);
  EXPECT_NE(context, nullptr) << error.field << ": " << error.message;
  return context;
}

std::string Serial(X509* certificate) {
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(
      ASN1_INTEGER_to_BN(X509_get_serialNumber(certificate), nullptr), &BN_free);
  char* text = serial ? BN_bn2hex(serial.get()) : nullptr;
  std::string result = text != nullptr ? text : "";
  OPENSSL_free(text);
  return result;
}

// The serial of the certificate in the file open as `fd` (closed here) if the file's key, which
// comes first, is that certificate's; "" otherwise.
std::string SerialOfMatchedPair(int fd) {
  std::unique_ptr<FILE, decltype(&fclose)> file(fdopen(fd, "r"), &fclose);
  if (!file) return "";
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_PrivateKey(file.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> certificate(
      PEM_read_X509(file.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!key || !certificate || X509_check_private_key(certificate.get(), key.get()) != 1) return "";
  return Serial(certificate.get());
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The serials of the certificates in the file at `path`, in order.
std::vector<std::string> Serials(const std::string& path) {
  std::unique_ptr<FILE, decltype(&fclose)> file(fopen(path.c_str(), "r"), &fclose);
  std::vector<std::string> serials;
  while (file) {
    std::unique_ptr<X509, decltype(&X509_free)> certificate(
        PEM_read_X509(file.get(), nullptr, nullptr, nullptr), &X509_free);
    if (!certificate) break;
    serials.push_back(Serial(certificate.get()));
  }
  return serials;
}

time_t ModifiedSeconds(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mtim.tv_sec;
}

TEST(PemFileTest, AnIdentityHoldsTheWrittenPairWholeAndSwapsItAtOnce) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const IssuedCertificate first = ca->Issue("localhost", {"DNS:localhost"});
  const IssuedCertificate second = ca->Issue("localhost", {"DNS:localhost"});
  auto file = PemFile::Create(PemFile::Part::kIdentity);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const std::string path = (*file)->path();

  ASSERT_TRUE(PemFile::Write(Context(first)->native_handle(), {file->get()}).ok());
  const time_t first_modified = ModifiedSeconds(path);
  const int opened_before_swap = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened_before_swap, 0);

  ASSERT_TRUE(PemFile::Write(Context(second)->native_handle(), {file->get()}).ok());
  EXPECT_GE(ModifiedSeconds(path), first_modified + 1);
  EXPECT_EQ(SerialOfMatchedPair(opened_before_swap), CertificateSerial(first.cert_file));
  const int opened_after_swap = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened_after_swap, 0);
  EXPECT_EQ(SerialOfMatchedPair(opened_after_swap), CertificateSerial(second.cert_file));

  // Swaps in one second still move the time on, a second each.
  const time_t second_modified = ModifiedSeconds(path);
  ASSERT_TRUE(PemFile::Write(Context(first)->native_handle(), {file->get()}).ok());
  EXPECT_GE(ModifiedSeconds(path), second_modified + 1);
}

TEST(PemFileTest, AContextWithoutAKeyIsRefusedAndTheFileKeepsItsPair) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const IssuedCertificate issued = ca->Issue("localhost", {"DNS:localhost"});
  auto file = PemFile::Create(PemFile::Part::kIdentity);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(PemFile::Write(Context(issued)->native_handle(), {file->get()}).ok());

  boost::asio::ssl::context empty(boost::asio::ssl::context::tls_server);
  EXPECT_EQ(PemFile::Write(empty.native_handle(), {file->get()}).code(), StatusCode::kInternal);
  const int opened = ::open((*file)->path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened, 0);
  EXPECT_EQ(SerialOfMatchedPair(opened), CertificateSerial(issued.cert_file));
}

TEST(PemFileTest, AuthoritiesAreEveryCertificateTheContextVerifiesClientsAgainstAndNoKey) {
  auto ca = CertificateAuthority::Create();
  auto other_ca = CertificateAuthority::Create("another CA");
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(other_ca, nullptr);
  const IssuedCertificate issued = ca->Issue("localhost", {"DNS:localhost"});
  const std::string both = ca->dir() + "/both.pem";
  std::ofstream(both) << Contents(ca->ca_file()) << Contents(other_ca->ca_file());
  auto file = PemFile::Create(PemFile::Part::kAuthorities);
  ASSERT_TRUE(file.ok()) << file.status().message();

  ASSERT_TRUE(PemFile::Write(Context(issued, both)->native_handle(), {file->get()}).ok());
  std::vector<std::string> written = Serials((*file)->path());
  std::vector<std::string> expected = {CertificateSerial(ca->ca_file()),
                                       CertificateSerial(other_ca->ca_file())};
  std::ranges::sort(written);
  std::ranges::sort(expected);
  EXPECT_EQ(written, expected);
  EXPECT_EQ(Contents((*file)->path()).find("PRIVATE KEY"), std::string::npos);

  const time_t modified = ModifiedSeconds((*file)->path());
  ASSERT_TRUE(PemFile::Write(Context(issued, ca->ca_file())->native_handle(), {file->get()}).ok());
  EXPECT_EQ(Serials((*file)->path()), std::vector<std::string>{CertificateSerial(ca->ca_file())});
  EXPECT_GE(ModifiedSeconds((*file)->path()), modified + 1);

  // A context verifying no client has no authorities to give: the file keeps the last ones.
  EXPECT_EQ(PemFile::Write(Context(issued)->native_handle(), {file->get()}).code(),
            StatusCode::kInternal);
  EXPECT_EQ(Serials((*file)->path()), std::vector<std::string>{CertificateSerial(ca->ca_file())});
}

TEST(PemFileTest, FilesWrittenTogetherChangeAllOrNone) {
  auto ca = CertificateAuthority::Create();
  auto other_ca = CertificateAuthority::Create("another CA");
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(other_ca, nullptr);
  const IssuedCertificate first = ca->Issue("localhost", {"DNS:localhost"});
  const IssuedCertificate second = ca->Issue("localhost", {"DNS:localhost"});
  auto identity = PemFile::Create(PemFile::Part::kIdentity);
  auto authorities = PemFile::Create(PemFile::Part::kAuthorities);
  ASSERT_TRUE(identity.ok() && authorities.ok());
  ASSERT_TRUE(PemFile::Write(Context(first, ca->ca_file())->native_handle(),
                             {identity->get(), authorities->get()})
                  .ok());
  const time_t modified = ModifiedSeconds((*identity)->path());

  // The second context verifies no client: its authorities cannot be written, so its identity
  // is not swapped in either.
  EXPECT_EQ(PemFile::Write(Context(second)->native_handle(), {identity->get(), authorities->get()})
                .code(),
            StatusCode::kInternal);
  const int opened = ::open((*identity)->path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened, 0);
  EXPECT_EQ(SerialOfMatchedPair(opened), CertificateSerial(first.cert_file));
  EXPECT_EQ(ModifiedSeconds((*identity)->path()), modified);
  EXPECT_EQ(Serials((*authorities)->path()),
            std::vector<std::string>{CertificateSerial(ca->ca_file())});

  ASSERT_TRUE(PemFile::Write(Context(second, other_ca->ca_file())->native_handle(),
                             {identity->get(), authorities->get()})
                  .ok());
  const int reopened = ::open((*identity)->path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reopened, 0);
  EXPECT_EQ(SerialOfMatchedPair(reopened), CertificateSerial(second.cert_file));
  EXPECT_EQ(Serials((*authorities)->path()),
            std::vector<std::string>{CertificateSerial(other_ca->ca_file())});
}

}  // namespace
}  // namespace sluice::tls
