// The URLs a Redis store is configured with, parsed into client options. An error names what is
// wrong and never shows the password. Safe from any thread; a TLS URL's parse reads the TLS files
// (tls_context.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "redis/client.h"
#include "redis/cluster_client.h"
#include "sluice/redis_tls.h"
#include "sluice/status.h"

namespace sluice::redis {

inline constexpr std::string_view kClusterScheme = "redis+cluster://";
inline constexpr std::string_view kTlsClusterScheme = "rediss+cluster://";

// A Redis Cluster's URL (redis+cluster:// or rediss+cluster://).
bool IsClusterUrl(std::string_view url);
// A URL of Redis over TLS (rediss://, rediss+cluster:// or rediss+sentinel://).
bool IsTlsUrl(std::string_view url);
// A URL of a Redis store, by any of the schemes above.
bool IsRedisUrl(std::string_view url);
// The forms of the store URLs OpenStore knows, for an error naming an unknown one.
inline constexpr std::string_view kStoreUrlForms =
    "memory://, redis://host:port, rediss://host:port, unix:///path, "
    "redis+cluster://host:port,host:port,..., rediss+cluster://..., "
    "redis+sentinel://host:port,host:port,.../master_name or rediss+sentinel://...";

inline constexpr std::string_view kSentinelScheme = "redis+sentinel://";
inline constexpr std::string_view kTlsSentinelScheme = "rediss+sentinel://";

// A Redis master found through Redis Sentinel: the sentinels to ask, the name they monitor it
// by, and how to reach and log in to the master (`master`'s host and port are the sentinels'
// answer).
struct SentinelOptions {
  std::vector<std::string> sentinels;  // "host:port", asked in order
  std::string master_name;
  ClientOptions master;
  // The sentinels' own login, apart from the master's: their requirepass, or a user of their
  // ACL with its password; empty password: none.
  std::string sentinel_user;
  std::string sentinel_password;
  // rediss+sentinel://: TLS to the master, its replicas and the sentinels, with master.tls's
  // context; each server is verified as SentinelAccess says (sentinel_link.h).
  bool tls = false;
};

// With a `password` given apart from the URL (read from a file or the environment), the URL's
// credentials may only name the user, "user@", and a URL that holds a password is refused: the
// password is then in one place only.

// Over TLS (rediss), the connections use `tls`'s files, read here, and verify its server_name, by
// default the URL's host; a plain URL with any TLS option set is refused, so that a URL missing
// its 's' is never plain text by mistake.

// redis[s]://[user:password@]host:port[/db]  or  unix:///path/to/socket[?db=N]
Result<ClientOptions> ParseRedisUrl(std::string_view url, std::string_view password = {},
                                    const RedisTlsOptions& tls = {});

// redis[s]+cluster://[user:password@]host:port,host:port,...  Over TLS, each node verifies the
// name cluster_client.h says (ClusterOptions).
Result<ClusterOptions> ParseRedisClusterUrl(std::string_view url, std::string_view password = {},
                                            const RedisTlsOptions& tls = {});

// redis+sentinel://[user:password@]host:port,host:port,.../master_name (or rediss+sentinel://):
// the credentials are the master's; the sentinels' login is given apart.
Result<SentinelOptions> ParseRedisSentinelUrl(std::string_view url, std::string_view password = {},
                                              const RedisTlsOptions& tls = {});

// The URL with its password (whatever comes between the user's ':' and the last '@') shown as
// "***", fit for a log line or an error message; the URL as it is when it holds no credentials.
std::string RedactedUrl(std::string_view url);

}  // namespace sluice::redis
