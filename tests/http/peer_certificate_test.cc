// What a client certificate says of its owner (tls/peer_certificate.h), read from certificates
// made by openssl, and how a caller's client_san is matched against it.
#include "tls/peer_certificate.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "support/certificates.h"

namespace sluice::tls {
namespace {

using ::sluice::testing::CertificateAuthority;

PeerCertificate Describe(const std::string& cert_file) {
  std::unique_ptr<FILE, decltype(&fclose)> file(fopen(cert_file.c_str(), "r"), &fclose);
  EXPECT_NE(file, nullptr) << cert_file;
  if (!file) return {};
  std::unique_ptr<X509, decltype(&X509_free)> certificate(
      PEM_read_X509(file.get(), nullptr, nullptr, nullptr), &X509_free);
  EXPECT_NE(certificate, nullptr) << cert_file;
  if (!certificate) return {};
  return DescribeCertificate(certificate.get());
}

TEST(PeerCertificateTest, ReadsTheSubjectAndEveryKindOfAlternativeName) {
  auto ca = CertificateAuthority::Create();
  ASSERT_NE(ca, nullptr);
  const auto issued = ca->Issue(
      "checkout", {"DNS:checkout.internal", "URI:spiffe://prod/checkout", "IP:10.0.0.7", "IP:::1"});
  const PeerCertificate peer = Describe(issued.cert_file);
  EXPECT_EQ(peer.subject_cn, "checkout");
  EXPECT_EQ(peer.sans,
            (std::vector<std::string>{"DNS:checkout.internal", "URI:spiffe://prod/checkout",
                                      "IP:10.0.0.7", "IP:::1"}));
}

TEST(PeerCertificateTest, ACallerIsNamedByTheDnsAndUriNamesAlone) {
  const PeerCertificate peer{
      "checkout", {"DNS:checkout.internal", "IP:10.0.0.7", "URI:spiffe://prod/checkout"}};
  EXPECT_EQ(DnsAndUriNames(peer),
            (std::vector<std::string>{"checkout.internal", "spiffe://prod/checkout"}));
  EXPECT_TRUE(DnsAndUriNames(PeerCertificate{"checkout", {}}).empty());
}

}  // namespace
}  // namespace sluice::tls
