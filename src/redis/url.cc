#include "redis/url.h"

#include <charconv>
#include <string>

#include "redis/tls_context.h"

namespace sluice::redis {
namespace {

constexpr std::string_view kSingleForms =
    "redis://[user:password@]host:port[/db], rediss://[user:password@]host:port[/db] (TLS) or "
    "unix:///path[?db=N]";
constexpr std::string_view kClusterForm =
    "redis+cluster://[user:password@]host:port,host:port,... or rediss+cluster://... (TLS)";
constexpr std::string_view kSentinelForm =
    "redis+sentinel://[user:password@]host:port,host:port,.../master_name";
constexpr std::string_view kKnownSchemes =
    "the schemes known are redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, "
    "redis+sentinel:// and rediss+sentinel://";

Status BadUrl(std::string_view url, std::string_view why,
              std::string_view expected = kSingleForms) {
  return Status::InvalidArgument("bad Redis URL '" + RedactedUrl(url) + "': " + std::string(why) +
                                 " (expected " + std::string(expected) + ")");
}

bool ParseNumber(std::string_view text, int& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// Takes "user:password@" or "password@" off the front of `rest` into `options`; with a
// `password` given apart, "user@" only. What is wrong with them, or empty.
std::string_view TakeCredentials(std::string_view& rest, std::string_view password,
                                 ClientOptions& options) {
  options.password = std::string(password);
  const auto at = rest.rfind('@');
  if (at == std::string_view::npos) return {};
  const std::string_view credentials = rest.substr(0, at);
  rest = rest.substr(at + 1);
  const auto colon = credentials.find(':');
  if (!password.empty()) {
    if (colon != std::string_view::npos) {
      return "the password is given apart (a file or the environment): the URL may name only "
             "the user, user@host";
    }
    options.user = std::string(credentials);
  } else if (colon != std::string_view::npos) {
    options.user = std::string(credentials.substr(0, colon));
    options.password = std::string(credentials.substr(colon + 1));
  } else {
    options.password = std::string(credentials);
  }
  return {};
}

// "host[:port]" into `options`; what is wrong with it, or empty.
std::string_view ParseHostPort(std::string_view text, ClientOptions& options) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    options.host = std::string(text);
  } else {
    options.host = std::string(text.substr(0, colon));
    if (!ParseNumber(text.substr(colon + 1), options.port) || options.port <= 0 ||
        options.port > 65535) {
      return "the port must be a number from 1 to 65535";
    }
  }
  if (options.host.empty()) return "missing host";
  return {};
}

bool HasTlsOptions(const RedisTlsOptions& tls) {
  return !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
         !tls.server_name.empty() || tls.insecure_skip_verify;
}

// The TLS context of a TLS URL into `options`; a plain URL with TLS options is refused.
Status TakeTls(std::string_view url, const RedisTlsOptions& tls, ClientOptions& options) {
  if (!IsTlsUrl(url)) {
    if (!HasTlsOptions(tls)) return Status::Ok();
    return Status::InvalidArgument("TLS options are given for '" + RedactedUrl(url) +
                                   "', a plain-text URL: use rediss://, rediss+cluster:// or "
                                   "rediss+sentinel://");
  }
  auto context = TlsContext::Create(tls);
  if (!context.ok()) return context.status();
  options.tls = std::move(*context);
  options.tls_server_name = tls.server_name;
  return Status::Ok();
}

}  // namespace

bool IsClusterUrl(std::string_view url) {
  return url.starts_with(kClusterScheme) || url.starts_with(kTlsClusterScheme);
}

bool IsTlsUrl(std::string_view url) {
  return url.starts_with("rediss://") || url.starts_with(kTlsClusterScheme) ||
         url.starts_with(kTlsSentinelScheme);
}

bool IsRedisUrl(std::string_view url) {
  return url.starts_with("redis://") || url.starts_with("unix://") || IsClusterUrl(url) ||
         IsTlsUrl(url) || url.starts_with(kSentinelScheme) || url.starts_with(kTlsSentinelScheme);
}

std::string RedactedUrl(std::string_view url) {
  const auto scheme_end = url.find("://");
  const auto userinfo = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const auto at = url.rfind('@');
  if (at == std::string_view::npos || at < userinfo) return std::string(url);
  const auto colon = url.substr(userinfo, at - userinfo).find(':');
  const auto secret = colon == std::string_view::npos ? userinfo : userinfo + colon + 1;
  return std::string(url.substr(0, secret)) + "***" + std::string(url.substr(at));
}

Result<ClientOptions> ParseRedisUrl(std::string_view url, std::string_view password,
                                    const RedisTlsOptions& tls) {
  ClientOptions options;
  constexpr std::string_view kRedis = "redis://", kRediss = "rediss://", kUnix = "unix://";
  if (url.starts_with(kUnix)) {
    std::string_view rest = url.substr(kUnix.size());
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
      const std::string_view query = rest.substr(q + 1);
      rest = rest.substr(0, q);
      if (!query.starts_with("db=") || !ParseNumber(query.substr(3), options.db) ||
          options.db < 0) {
        return BadUrl(url, "the only query parameter is db=N");
      }
    }
    if (!rest.starts_with('/')) return BadUrl(url, "the socket path must be absolute");
    options.unix_path = std::string(rest);
    options.password = std::string(password);
    if (Status s = TakeTls(url, tls, options); !s.ok()) return s;
    return options;
  }
  if (!url.starts_with(kRedis) && !url.starts_with(kRediss)) {
    return BadUrl(url, std::string("unknown scheme: ") + std::string(kKnownSchemes));
  }
  std::string_view rest = url.substr(url.starts_with(kRedis) ? kRedis.size() : kRediss.size());
  if (const std::string_view why = TakeCredentials(rest, password, options); !why.empty()) {
    return BadUrl(url, why);
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty() && (!ParseNumber(db, options.db) || options.db < 0)) {
      return BadUrl(url, "the database must be a number");
    }
  }
  if (const std::string_view why = ParseHostPort(rest, options); !why.empty()) {
    return BadUrl(url, why);
  }
  if (Status s = TakeTls(url, tls, options); !s.ok()) return s;
  if (options.tls && options.tls_server_name.empty()) options.tls_server_name = options.host;
  return options;
}

Result<ClusterOptions> ParseRedisClusterUrl(std::string_view url, std::string_view password,
                                            const RedisTlsOptions& tls) {
  if (!IsClusterUrl(url)) {
    return BadUrl(url, std::string("unknown scheme: ") + std::string(kKnownSchemes), kClusterForm);
  }
  ClusterOptions options;
  std::string_view rest = url.substr(url.starts_with(kClusterScheme) ? kClusterScheme.size()
                                                                     : kTlsClusterScheme.size());
  if (const std::string_view why = TakeCredentials(rest, password, options.node); !why.empty()) {
    return BadUrl(url, why, kClusterForm);
  }
  if (rest.find('/') != std::string_view::npos) {
    return BadUrl(url, "a Redis Cluster has only database 0", kClusterForm);
  }
  while (true) {
    const auto comma = rest.find(',');
    ClientOptions seed;
    if (const std::string_view why = ParseHostPort(rest.substr(0, comma), seed); !why.empty()) {
      return BadUrl(url, why, kClusterForm);
    }
    options.seeds.push_back(seed.host + ":" + std::to_string(seed.port));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (Status s = TakeTls(url, tls, options.node); !s.ok()) return s;
  return options;
}

Result<SentinelOptions> ParseRedisSentinelUrl(std::string_view url, std::string_view password,
                                              const RedisTlsOptions& tls) {
  SentinelOptions options;
  std::string_view rest;
  if (url.starts_with(kSentinelScheme)) {
    rest = url.substr(kSentinelScheme.size());
  } else if (url.starts_with(kTlsSentinelScheme)) {
    rest = url.substr(kTlsSentinelScheme.size());
    options.tls = true;
  } else {
    return BadUrl(url, "unknown scheme", kSentinelForm);
  }
  if (const std::string_view why = TakeCredentials(rest, password, options.master); !why.empty()) {
    return BadUrl(url, why, kSentinelForm);
  }
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return BadUrl(url, "missing the master's name after the sentinels", kSentinelForm);
  }
  options.master_name = std::string(rest.substr(slash + 1));
  if (options.master_name.find_first_of("/?# ") != std::string::npos) {
    return BadUrl(url, "the master's name must not contain '/', '?', '#' or a space",
                  kSentinelForm);
  }
  rest = rest.substr(0, slash);
  while (true) {
    const auto comma = rest.find(',');
    ClientOptions sentinel;
    sentinel.port = 26379;
    if (const std::string_view why = ParseHostPort(rest.substr(0, comma), sentinel); !why.empty()) {
      return BadUrl(url, why, kSentinelForm);
    }
    options.sentinels.push_back(sentinel.host + ":" + std::to_string(sentinel.port));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (Status s = TakeTls(url, tls, options.master); !s.ok()) return s;
  return options;
}

}  // namespace sluice::redis
