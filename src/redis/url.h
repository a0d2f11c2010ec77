// The URLs a Redis store is configured with, parsed into client options. An error names what is
// wrong and never shows the password. Pure functions, safe from any thread.
#pragma once

#include <string_view>

#include "redis/client.h"
#include "redis/cluster_client.h"
#include "sluice/status.h"

namespace sluice::redis {

inline constexpr std::string_view kClusterScheme = "redis+cluster://";

// redis://[user:password@]host:port[/db]  or  unix:///path/to/socket[?db=N]
Result<ClientOptions> ParseRedisUrl(std::string_view url);

// redis+cluster://[user:password@]host:port,host:port,...
Result<ClusterOptions> ParseRedisClusterUrl(std::string_view url);

}  // namespace sluice::redis
