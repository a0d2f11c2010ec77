#include "config/store_url.h"

#include <cstdlib>
#include <string>

#include "redis/url.h"

namespace sluice::config {
namespace {

bool IsSentinelUrl(std::string_view url) {
  return url.starts_with(redis::kSentinelScheme) || url.starts_with(redis::kTlsSentinelScheme);
}

// What is wrong with the URL, or OK.
Status CheckUrl(const StoreConfig& store) {
  const std::string& url = store.url;
  if (url == "memory://") return Status::Ok();
  if (IsSentinelUrl(url)) return redis::ParseRedisSentinelUrl(url, store.password).status();
  if (redis::IsClusterUrl(url)) return redis::ParseRedisClusterUrl(url, store.password).status();
  if (redis::IsRedisUrl(url)) return redis::ParseRedisUrl(url, store.password).status();
  return Status::InvalidArgument("unknown store URL '" + redis::RedactedUrl(url) + "' (expected " +
                                 std::string(redis::kStoreUrlForms) + ")");
}

}  // namespace

Status ParseStoreUrlAndSentinel(const YamlReporter& report, const YamlFields& fields,
                                StoreConfig& store) {
  const YAML::Node file = fields.Get("sentinel_password_file");
  const YAML::Node env = fields.Get("sentinel_password_env");
  if (file.IsDefined() && env.IsDefined()) {
    return report.At(env, fields.Path("sentinel_password_env"),
                     "give the sentinels' password in one place: sentinel_password_file or "
                     "sentinel_password_env");
  }
  if (file.IsDefined()) {
    auto path = fields.ReadString(file, "sentinel_password_file");
    if (!path.ok()) return path.status();
    auto password = ReadPasswordFile(*path);
    if (!password.ok()) {
      return report.At(file, fields.Path("sentinel_password_file"), password.status().message());
    }
    store.sentinel_password = std::move(*password);
  }
  if (env.IsDefined()) {
    auto name = fields.ReadString(env, "sentinel_password_env");
    if (!name.ok()) return name.status();
    const char* value = name->empty() ? nullptr : std::getenv(name->c_str());
    if (value == nullptr || *value == '\0') {
      return report.At(env, fields.Path("sentinel_password_env"),
                       "the environment variable '" + *name + "' is not set or is empty");
    }
    store.sentinel_password = value;
  }
  if (const YAML::Node user = fields.Get("sentinel_user"); user.IsDefined()) {
    auto name = fields.ReadString(user, "sentinel_user");
    if (!name.ok()) return name.status();
    if (name->empty()) return report.At(user, fields.Path("sentinel_user"), "must not be empty");
    if (store.sentinel_password.empty()) {
      return report.At(user, fields.Path("sentinel_user"),
                       "a sentinel user needs its password: sentinel_password_file or "
                       "sentinel_password_env");
    }
    store.sentinel_user = std::move(*name);
  }
  if (!store.sentinel_password.empty() && !IsSentinelUrl(store.url)) {
    const bool from_file = file.IsDefined();
    return report.At(from_file ? file : env,
                     fields.Path(from_file ? "sentinel_password_file" : "sentinel_password_env"),
                     "a sentinels' password needs a redis+sentinel:// store URL");
  }
  if (Status s = CheckUrl(store); !s.ok()) {
    const YAML::Node url = fields.Get("url");
    return url.IsDefined() ? report.At(url, fields.Path("url"), s.message())
                           : fields.Error("url", s.message());
  }
  return Status::Ok();
}

}  // namespace sluice::config
