#include "config/store_tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "redis/tls_context.h"
#include "redis/url.h"

namespace sluice::config {

Result<RedisTlsOptions> ParseStoreTls(const YamlReporter& report, const YAML::Node& tls,
                                      std::string_view store_url) {
  YamlFields fields(report, tls, "store.tls");
  if (Status s =
          fields.Check({"ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"});
      !s.ok()) {
    return s;
  }
  if (!redis::IsTlsUrl(store_url)) {
    return report.At(tls, "store.tls",
                     "the store URL is not one over TLS: use rediss://, rediss+cluster:// or "
                     "rediss+sentinel://");
  }
  RedisTlsOptions options;
  for (auto [field, target] :
       {std::pair{"ca_file", &options.ca_file}, std::pair{"cert_file", &options.cert_file},
        std::pair{"key_file", &options.key_file}}) {
    const YAML::Node node = fields.Get(field);
    if (!node.IsDefined()) continue;
    auto path = fields.ReadString(node, field);
    if (!path.ok()) return path.status();
    if (path->empty()) return report.At(node, fields.Path(field), "must not be empty");
    if (std::ifstream file(*path); !file) {
      return report.At(node, fields.Path(field),
                       "cannot read '" + *path + "': " + std::strerror(errno));
    }
    *target = std::move(*path);
  }
  if (const YAML::Node name = fields.Get("server_name"); name.IsDefined()) {
    auto text = fields.ReadString(name, "server_name");
    if (!text.ok()) return text.status();
    if (text->empty()) return report.At(name, fields.Path("server_name"), "must not be empty");
    options.server_name = std::move(*text);
  }
  if (Status s = fields.ReadOptionalBool("insecure_skip_verify", options.insecure_skip_verify);
      !s.ok()) {
    return s;
  }
  // The files as the store will read them: certificates, a key that is the certificate's.
  if (auto context = redis::TlsContext::Create(options); !context.ok()) {
    const std::string why = context.status().message();
    const char* field = why.find("key_file") != std::string::npos    ? "key_file"
                        : why.find("cert_file") != std::string::npos ? "cert_file"
                        : why.find("ca_file") != std::string::npos   ? "ca_file"
                                                                     : nullptr;
    const YAML::Node node = field == nullptr ? YAML::Node() : fields.Get(field);
    return node.IsDefined() ? report.At(node, fields.Path(field), why)
                            : report.At(tls, "store.tls", why);
  }
  return options;
}

}  // namespace sluice::config
