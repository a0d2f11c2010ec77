// The URLs a Redis store is configured with, parsed into client options. An error names what is
// wrong and never shows the password. Pure functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "redis/client.h"
#include "redis/cluster_client.h"
#include "sluice/status.h"

namespace sluice::redis {

inline constexpr std::string_view kClusterScheme = "redis+cluster://";

// With a `password` given apart from the URL (read from a file or the environment), the URL's
// credentials may only name the user, "user@", and a URL that holds a password is refused: the
// password is then in one place only.

// redis://[user:password@]host:port[/db]  or  unix:///path/to/socket[?db=N]
Result<ClientOptions> ParseRedisUrl(std::string_view url, std::string_view password = {});

// redis+cluster://[user:password@]host:port,host:port,...
Result<ClusterOptions> ParseRedisClusterUrl(std::string_view url, std::string_view password = {});

// The URL with its password (whatever comes between the user's ':' and the last '@') shown as
// "***", fit for a log line or an error message; the URL as it is when it holds no credentials.
std::string RedactedUrl(std::string_view url);

}  // namespace sluice::redis
