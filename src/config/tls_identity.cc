#include "config/tls_identity.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace sluice::config {
namespace {

bool IsSanChar(char c) { return c > ' ' && c < 0x7f; }

// The path of `field` when it names a file this process can open for reading.
Result<std::string> ReadablePath(const YamlFields& fields, std::string_view field) {
  const YAML::Node node = fields.Get(field);
  auto path = fields.ReadString(node, field);
  if (!path.ok()) return path.status();
  if (path->empty()) return fields.Error(field, "must not be empty");
  std::ifstream in(*path, std::ios::binary);
  if (!in) {
    return fields.Error(field, "cannot read '" + *path + "': " + std::strerror(errno));
  }
  return path;
}

}  // namespace

Result<std::vector<std::string>> ParseClientSans(const YamlFields& fields, std::string_view field) {
  const YAML::Node list = fields.Get(field);
  if (!list.IsSequence() || list.size() == 0) {
    return fields.Error(field, "expected a non-empty list of subject alternative names");
  }
  std::vector<std::string> sans;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = std::string(field) + "[" + std::to_string(i) + "]";
    auto san = fields.ReadString(list[i], item);
    if (!san.ok()) return san.status();
    if (san->empty() || san->size() > kMaxClientSanBytes ||
        !std::all_of(san->begin(), san->end(), IsSanChar)) {
      return fields.report().At(list[i], fields.Path(item),
                                "expected a DNS or URI name: 1 to " +
                                    std::to_string(kMaxClientSanBytes) +
                                    " printable ASCII characters, no spaces");
    }
    if (std::find(sans.begin(), sans.end(), *san) != sans.end()) {
      return fields.report().At(list[i], fields.Path(item), "'" + *san + "' given twice");
    }
    sans.push_back(std::move(*san));
  }
  return sans;
}

Result<RlsTlsConfig> ParseRlsTls(const YamlReporter& report, const YAML::Node& node) {
  YamlFields fields(report, node, "rls.tls");
  if (Status s = fields.Check({"cert_file", "key_file", "client_ca_file", "client_san"}); !s.ok()) {
    return s;
  }
  RlsTlsConfig tls;
  for (auto [field, target] :
       {std::pair{"cert_file", &tls.cert_file}, std::pair{"key_file", &tls.key_file},
        std::pair{"client_ca_file", &tls.client_ca_file}}) {
    if (!fields.Has(field)) {
      if (target == &tls.client_ca_file) continue;
      return fields.Missing(field);
    }
    auto path = ReadablePath(fields, field);
    if (!path.ok()) return path.status();
    *target = std::move(*path);
  }
  if (fields.Has("client_san")) {
    if (tls.client_ca_file.empty()) {
      return fields.Error("client_san",
                          "needs client_ca_file: the names are those of verified client "
                          "certificates");
    }
    auto sans = ParseClientSans(fields, "client_san");
    if (!sans.ok()) return sans.status();
    tls.client_san = std::move(*sans);
  }
  return tls;
}

}  // namespace sluice::config
