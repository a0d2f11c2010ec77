// The URLs a Redis store is configured with, parsed into client options. An error names what is
// wrong and never shows the password. Pure functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "redis/client.h"
#include "redis/cluster_client.h"
#include "sluice/status.h"

namespace sluice::redis {

inline constexpr std::string_view kClusterScheme = "redis+cluster://";
inline constexpr std::string_view kSentinelScheme = "redis+sentinel://";
inline constexpr std::string_view kTlsSentinelScheme = "rediss+sentinel://";

// A Redis master found through Redis Sentinel: the sentinels to ask, the name they monitor it
// by, and how to reach and log in to the master (`master`'s host and port are the sentinels'
// answer).
struct SentinelOptions {
  std::vector<std::string> sentinels;  // "host:port", asked in order
  std::string master_name;
  ClientOptions master;
  // The sentinels' own password (their requirepass), apart from the master's; empty: none.
  std::string sentinel_password;
  // rediss+sentinel://: TLS to the master and to the sentinels.
  bool tls = false;
};

// With a `password` given apart from the URL (read from a file or the environment), the URL's
// credentials may only name the user, "user@", and a URL that holds a password is refused: the
// password is then in one place only.

// redis://[user:password@]host:port[/db]  or  unix:///path/to/socket[?db=N]
Result<ClientOptions> ParseRedisUrl(std::string_view url, std::string_view password = {});

// redis+cluster://[user:password@]host:port,host:port,...
Result<ClusterOptions> ParseRedisClusterUrl(std::string_view url, std::string_view password = {});

// redis+sentinel://[user:password@]host:port,host:port,.../master_name (or rediss+sentinel://):
// the credentials are the master's; the sentinels' password is given apart.
Result<SentinelOptions> ParseRedisSentinelUrl(std::string_view url, std::string_view password = {});

// The URL with its password (whatever comes between the user's ':' and the last '@') shown as
// "***", fit for a log line or an error message; the URL as it is when it holds no credentials.
std::string RedactedUrl(std::string_view url);

}  // namespace sluice::redis
