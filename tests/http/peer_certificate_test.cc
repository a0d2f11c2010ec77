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

TEST(PeerCertificateTest, AClientSanMatchesOneNameExactly) {
  const PeerCertificate peer{"checkout", {"DNS:checkout.internal", "URI:spiffe://prod/checkout"}};
  EXPECT_TRUE(PresentsSan(peer, "DNS:checkout.internal"));
  EXPECT_TRUE(PresentsSan(peer, "dns:checkout.internal"));  // the kind in any case
  EXPECT_TRUE(PresentsSan(peer, "URI:spiffe://prod/checkout"));
  EXPECT_FALSE(PresentsSan(peer, "DNS:Checkout.internal"));  // the name exactly
  EXPECT_FALSE(PresentsSan(peer, "DNS:checkout"));
  EXPECT_FALSE(PresentsSan(peer, "URI:checkout.internal"));  // another kind
  EXPECT_FALSE(PresentsSan(peer, "checkout.internal"));
  EXPECT_FALSE(PresentsSan(peer, "DNS:checkout.internal.evil"));
  EXPECT_FALSE(PresentsSan(PeerCertificate{"checkout", {}}, "DNS:checkout"));
}

}  // namespace
}  // namespace sluice::tls
