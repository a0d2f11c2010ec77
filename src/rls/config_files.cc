// A Config from envoyproxy/ratelimit's YAML files on disk (see config.h): one domain per file, a
// directory's *.yaml and *.yml files in name order.
#include <algorithm>
#include <filesystem>

#include "config/yaml_fields.h"
#include "rls/config.h"

namespace sluice::rls {
namespace {

constexpr size_t kMaxFileBytes = 16 << 20;

}  // namespace

Result<Config> CombineDomains(std::vector<DomainConfig> domains) {
  Config config;
  for (DomainConfig& domain : domains) {
    for (const DomainConfig& earlier : config.domains) {
      if (earlier.domain == domain.domain) {
        return Status::InvalidArgument(domain.file + ": domain: duplicate domain '" +
                                       domain.domain + "' (also in " + earlier.file + ")");
      }
    }
    config.domains.push_back(std::move(domain));
  }
  return config;
}

Result<Config> LoadConfigFiles(const std::vector<std::string>& paths) {
  std::vector<DomainConfig> domains;
  for (const std::string& path : paths) {
    auto text = config::ReadYamlFile(path, "rate limit config", kMaxFileBytes);
    if (!text.ok()) return text.status();
    auto domain = ParseDomainConfig(*text, path);
    if (!domain.ok()) return domain.status();
    domains.push_back(std::move(*domain));
  }
  return CombineDomains(std::move(domains));
}

Result<Config> LoadConfigDirectory(const std::string& directory) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(directory, ec);
  if (ec) {
    return Status::InvalidArgument("cannot read rate limit config directory '" + directory +
                                   "': " + ec.message());
  }
  std::vector<std::string> paths;
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    const std::string extension = entry.path().extension().string();
    if (name.starts_with('.') || (extension != ".yaml" && extension != ".yml")) continue;
    if (entry.is_regular_file(ec)) paths.push_back(entry.path().string());
  }
  if (paths.empty()) {
    return Status::InvalidArgument("no *.yaml or *.yml file in rate limit config directory '" +
                                   directory + "'");
  }
  std::sort(paths.begin(), paths.end());
  return LoadConfigFiles(paths);
}

}  // namespace sluice::rls
