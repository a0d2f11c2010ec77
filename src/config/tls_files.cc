#include "config/tls_files.h"

#include "config/yaml_fields.h"
#include "tls/server_context.h"

namespace sluice::config {

Result<tls::ServerFiles> ParseTlsFiles(const YamlReporter& report, const YAML::Node& node,
                                       const std::string& path) {
  YamlFields fields(report, node, path);
  if (Status s = fields.Check({"cert_file", "key_file", "client_ca_file"}); !s.ok()) return s;
  tls::ServerFiles files;
  for (auto [field, target, required] :
       {std::tuple{"cert_file", &files.cert_file, true},
        std::tuple{"key_file", &files.key_file, true},
        std::tuple{"client_ca_file", &files.client_ca_file, false}}) {
    const YAML::Node value = fields.Get(field);
    if (!value.IsDefined()) {
      if (required) return fields.Missing(field);
      continue;
    }
    auto text = fields.ReadString(value, field);
    if (!text.ok()) return text.status();
    if (text->empty()) return fields.Error(field, "must not be empty");
    *target = std::move(*text);
  }
  tls::ContextError error;
  if (!tls::LoadServerContext(files, error)) return fields.Error(error.field, error.message);
  return files;
}

}  // namespace sluice::config
