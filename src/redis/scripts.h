// The Lua scripts of the Redis store. Their sources are src/redis/lua/*.lua, put together at
// build time by cmake/embed_lua.cmake.
#pragma once

#include <string_view>

#include "redis/client.h"
#include "sluice/limit.h"

namespace sluice::redis {

// Generated: the check script of each algorithm, indexed by Algorithm; the coalesced one of each
// algorithm, likewise; the all-or-nothing one.
extern const std::string_view kCheckSources[6];
extern const std::string_view kCheckManySources[6];
extern const std::string_view kCheckAllSource;
// Generated: the give-back script of each meter (token_bucket, leaky_bucket, gcra, in the order
// of Algorithm).
extern const std::string_view kGiveBackSources[3];

// Their KEYS, ARGV and replies: src/redis/script_call.h.
const Script& CheckScript(Algorithm algorithm);
const Script& CheckManyScript(Algorithm algorithm);
// Loaded with the shebang "#!lua flags=allow-cross-slot-keys" (Redis 7.0 or later), which lets it
// reach keys of every slot its node holds.
const Script& CheckAllScript();
// Of a meter (IsMeter) only.
const Script& GiveBackScript(Algorithm meter);

}  // namespace sluice::redis
