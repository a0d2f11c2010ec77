// The Lua scripts of the Redis store. Their sources are src/redis/lua/*.lua, put together at
// build time by cmake/embed_lua.cmake.
#pragma once

#include <string_view>

#include "redis/client.h"
#include "sluice/limit.h"

namespace sluice::redis {

// Generated: the check script of each algorithm, indexed by Algorithm; the all-or-nothing one.
extern const std::string_view kCheckSources[6];
extern const std::string_view kCheckAllSource;

// KEYS: state key [, auxiliary key]; ARGV: now ('' = Redis TIME), expiry margin ms, cost, the
// algorithm's two parameters, max_delay µs. Returns {allowed, remaining, retry_after,
// reset_after, delay, replenish_after}.
const Script& CheckScript(Algorithm algorithm);
// KEYS: state and auxiliary key per limit; ARGV: now, margin, n, then per limit: algorithm name,
// cost, two parameters. Returns one reply as above per limit.
const Script& CheckAllScript();

}  // namespace sluice::redis
