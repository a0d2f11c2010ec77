// The in-memory file gRPC's port reads its certificate and key from (tls/identity_file.h): it
// holds the pair of the context written, whole; a swap leaves a reader that opened it before
// with the previous pair, whole; and each swap moves its modification time on by a second at
// least, which is how a reader comparing times in whole seconds sees it.
#include "tls/identity_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "support/certificates.h"
#include "tls/server_context.h"

namespace sluice::tls {
namespace {

using ::sluice::testing::CertificateAuthority;
using ::sluice::testing::CertificateSerial;
using ::sluice::testing::IssuedCertificate;

std::shared_ptr<boost::asio::ssl::context> Context(const IssuedCertificate& issued) {
  ContextError error;
  auto context = LoadServerContext(
      {.cert_file = issued.cert_file, .key_file = issued.key_file, .client_ca_file = ""}, error);
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

time_t ModifiedSeconds(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mtim.tv_sec;
}

TEST(IdentityFileTest, HoldsTheWrittenPairWholeAndSwapsItAtOnce) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const IssuedCertificate first = ca->Issue("localhost", {"DNS:localhost"});
  const IssuedCertificate second = ca->Issue("localhost", {"DNS:localhost"});
  auto file = IdentityFile::Create();
  ASSERT_TRUE(file.ok()) << file.status().message();
  const std::string path = (*file)->path();

  ASSERT_TRUE((*file)->Write(Context(first)->native_handle()).ok());
  const time_t first_modified = ModifiedSeconds(path);
  const int opened_before_swap = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened_before_swap, 0);

  ASSERT_TRUE((*file)->Write(Context(second)->native_handle()).ok());
  EXPECT_GE(ModifiedSeconds(path), first_modified + 1);
  EXPECT_EQ(SerialOfMatchedPair(opened_before_swap), CertificateSerial(first.cert_file));
  const int opened_after_swap = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened_after_swap, 0);
  EXPECT_EQ(SerialOfMatchedPair(opened_after_swap), CertificateSerial(second.cert_file));

  // Swaps in one second still move the time on, a second each.
  const time_t second_modified = ModifiedSeconds(path);
  ASSERT_TRUE((*file)->Write(Context(first)->native_handle()).ok());
  EXPECT_GE(ModifiedSeconds(path), second_modified + 1);
}

TEST(IdentityFileTest, AContextWithoutAKeyIsRefusedAndTheFileKeepsItsPair) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const IssuedCertificate issued = ca->Issue("localhost", {"DNS:localhost"});
  auto file = IdentityFile::Create();
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE((*file)->Write(Context(issued)->native_handle()).ok());

  boost::asio::ssl::context empty(boost::asio::ssl::context::tls_server);
  EXPECT_EQ((*file)->Write(empty.native_handle()).code(), StatusCode::kInternal);
  const int opened = ::open((*file)->path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opened, 0);
  EXPECT_EQ(SerialOfMatchedPair(opened), CertificateSerial(issued.cert_file));
}

}  // namespace
}  // namespace sluice::tls
