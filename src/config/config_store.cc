#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "config/sections.h"
#include "config/store_tls.h"
#include "config/store_url.h"

namespace sluice::config {
namespace {

constexpr int64_t kMaxInstances = 1'000'000;
constexpr int64_t kMaxStoreTimeoutMs = 5'000;

// A URL's "user:password@": a ':' before its last '@', after the scheme.
bool UrlHoldsPassword(std::string_view url) {
  const auto scheme_end = url.find("://");
  const auto userinfo = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const auto at = url.rfind('@');
  return at != std::string_view::npos && at > userinfo &&
         url.substr(userinfo, at - userinfo).find(':') != std::string_view::npos;
}

// store.key_prefix, and the password from store.password_file or store.password_env.
Status ParseStoreAccess(const Reporter& report, const Fields& fields, StoreConfig& store) {
  if (const YAML::Node prefix = fields.Get("key_prefix"); prefix.IsDefined()) {
    auto text = fields.ReadString(prefix, "key_prefix");
    if (!text.ok()) return text.status();
    const auto bad = [&](std::string_view why) {
      return report.At(prefix, fields.Path("key_prefix"),
                       "bad key prefix '" + *text + "': " + std::string(why));
    };
    if (text->find_first_of("{}") != std::string::npos) {
      return bad(
          "must not contain '{' or '}' (a key's Redis Cluster hash tag is the limiter "
          "key's own)");
    }
    if (text->empty() || text->size() > kMaxKeyPrefixBytes ||
        !std::all_of(text->begin(), text->end(), IsNameChar)) {
      return bad("expected 1 to " + std::to_string(kMaxKeyPrefixBytes) +
                 " letters, digits, '_', '.', ':' or '-' (it is also the Redis ACL's key "
                 "pattern)");
    }
    store.key_prefix = std::move(*text);
  }
  const YAML::Node file = fields.Get("password_file");
  const YAML::Node env = fields.Get("password_env");
  if (file.IsDefined() && env.IsDefined()) {
    return report.At(env, fields.Path("password_env"),
                     "give the password in one place: password_file or password_env");
  }
  if (file.IsDefined()) {
    auto path = fields.ReadString(file, "password_file");
    if (!path.ok()) return path.status();
    auto password = ReadPasswordFile(*path);
    if (!password.ok()) {
      return report.At(file, fields.Path("password_file"), password.status().message());
    }
    store.password = std::move(*password);
  }
  if (env.IsDefined()) {
    auto name = fields.ReadString(env, "password_env");
    if (!name.ok()) return name.status();
    const char* value = name->empty() ? nullptr : std::getenv(name->c_str());
    if (value == nullptr || *value == '\0') {
      return report.At(env, fields.Path("password_env"),
                       "the environment variable '" + *name + "' is not set or is empty");
    }
    store.password = value;
  }
  if (!store.password.empty() && UrlHoldsPassword(store.url)) {
    return report.At(file.IsDefined() ? file : env,
                     fields.Path(file.IsDefined() ? "password_file" : "password_env"),
                     "the store URL holds a password too: give it in one place (the URL may "
                     "name the user alone, redis://user@host:port)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadPasswordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot open '" + path + "': " + std::strerror(errno));
  std::string text(kMaxPasswordBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::InvalidArgument("cannot read '" + path + "'");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPasswordBytes) {
    return Status::InvalidArgument("'" + path + "' is larger than " +
                                   std::to_string(kMaxPasswordBytes) + " bytes");
  }
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty()) return Status::InvalidArgument("'" + path + "' is empty");
  if (text.find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument("'" + path + "' holds more than one line");
  }
  return text;
}

Status ParseStoreSection(const Reporter& report, const YAML::Node& node, StoreConfig& store) {
  Fields fields(report, node, "store");
  if (Status s = fields.Check({"url", "timeout_ms", "instances", "max_memory", "key_prefix",
                               "password_file", "password_env", "sentinel_user",
                               "sentinel_password_file", "sentinel_password_env", "tls"});
      !s.ok()) {
    return s;
  }
  if (const YAML::Node url = fields.Get("url"); url.IsDefined()) {
    auto text = fields.ReadString(url, "url");
    if (!text.ok()) return text.status();
    if (text->empty()) return report.At(url, fields.Path("url"), "must not be empty");
    store.url = std::move(*text);
  }
  if (const YAML::Node timeout = fields.Get("timeout_ms"); timeout.IsDefined()) {
    auto ms = fields.ReadInteger(timeout, "timeout_ms");
    if (!ms.ok()) return ms.status();
    // A store call must end well within the 10 s SIGTERM drain, which outlives its answer.
    if (*ms < 1 || *ms > kMaxStoreTimeoutMs) {
      return report.At(timeout, fields.Path("timeout_ms"),
                       "must be between 1 and " + std::to_string(kMaxStoreTimeoutMs));
    }
    store.timeout = std::chrono::milliseconds(*ms);
  }
  if (const YAML::Node instances = fields.Get("instances"); instances.IsDefined()) {
    auto n = fields.ReadInteger(instances, "instances");
    if (!n.ok()) return n.status();
    if (*n < 1 || *n > kMaxInstances) {
      return report.At(instances, fields.Path("instances"),
                       "must be between 1 and " + std::to_string(kMaxInstances));
    }
    store.instances = *n;
  }
  if (const YAML::Node max = fields.Get("max_memory"); max.IsDefined()) {
    auto bytes = fields.ReadMemorySize(max, "max_memory");
    if (!bytes.ok()) return bytes.status();
    store.max_memory = *bytes;
  }
  if (const YAML::Node tls = fields.Get("tls"); tls.IsDefined()) {
    auto options = ParseStoreTls(report, tls, store.url);
    if (!options.ok()) return options.status();
    store.tls = std::move(*options);
  }
  if (Status s = ParseStoreAccess(report, fields, store); !s.ok()) return s;
  return ParseStoreUrlAndSentinel(report, fields, store);
}

}  // namespace sluice::config
