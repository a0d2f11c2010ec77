// Who a client is, by the certificate it presented and the server verified (mTLS): its subject's
// common name and its subject alternative names, each written as in a certificate request
// ("DNS:checkout.internal", "URI:spiffe://prod/ns/shop/sa/checkout", "IP:10.0.0.7"). Plain values.
#pragma once

#include <openssl/ssl.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tls {

struct PeerCertificate {
  std::string subject_cn;         // empty if the subject has none
  std::vector<std::string> sans;  // DNS, URI and IP names, in the certificate's order
};

// What `certificate` says of its owner.
PeerCertificate DescribeCertificate(X509* certificate);

// The certificate the peer of `ssl` presented, once the handshake is done and it was verified;
// nullopt when it presented none (or it was not verified).
std::optional<PeerCertificate> VerifiedPeerCertificate(SSL* ssl);

// The DNS and URI names of `peer`'s SANs, without their kind ("checkout.internal",
// "spiffe://prod/checkout"), as server.auth's client_san names a caller (auth/callers.h).
std::vector<std::string> DnsAndUriNames(const PeerCertificate& peer);

}  // namespace sluice::tls
