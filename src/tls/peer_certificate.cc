#include "tls/peer_certificate.h"

#include <arpa/inet.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>

namespace sluice::tls {
namespace {

std::string AsString(const ASN1_STRING* text) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                     static_cast<size_t>(ASN1_STRING_length(text)));
}

std::string SubjectCommonName(X509* certificate) {
  X509_NAME* subject = X509_get_subject_name(certificate);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return {};
  return AsString(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
}

// "IP:" and the address, or empty for an address of an unknown length.
std::string IpName(const ASN1_OCTET_STRING* address) {
  std::array<char, INET6_ADDRSTRLEN> text{};
  const int length = ASN1_STRING_length(address);
  const int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : 0;
  if (family == 0 ||
      inet_ntop(family, ASN1_STRING_get0_data(address), text.data(), text.size()) == nullptr) {
    return {};
  }
  return std::string("IP:") + text.data();
}

std::vector<std::string> AlternativeNames(X509* certificate) {
  std::vector<std::string> names;
  using Names = std::unique_ptr<GENERAL_NAMES, decltype(&GENERAL_NAMES_free)>;
  Names sans(static_cast<GENERAL_NAMES*>(
                 X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)),
             &GENERAL_NAMES_free);
  if (!sans) return names;
  for (int i = 0; i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans.get(), i);
    std::string text;
    if (name->type == GEN_DNS) text = "DNS:" + AsString(name->d.dNSName);
    if (name->type == GEN_URI) text = "URI:" + AsString(name->d.uniformResourceIdentifier);
    if (name->type == GEN_IPADD) text = IpName(name->d.iPAddress);
    if (!text.empty()) names.push_back(std::move(text));
  }
  return names;
}

}  // namespace

PeerCertificate DescribeCertificate(X509* certificate) {
  return PeerCertificate{SubjectCommonName(certificate), AlternativeNames(certificate)};
}

std::optional<PeerCertificate> VerifiedPeerCertificate(SSL* ssl) {
  X509* certificate = SSL_get0_peer_certificate(ssl);
  if (certificate == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
  return DescribeCertificate(certificate);
}

std::vector<std::string> DnsAndUriNames(const PeerCertificate& peer) {
  std::vector<std::string> names;
  for (const std::string& san : peer.sans) {
    for (std::string_view kind : {"DNS:", "URI:"}) {
      if (san.starts_with(kind)) names.push_back(san.substr(kind.size()));
    }
  }
  return names;
}

}  // namespace sluice::tls
