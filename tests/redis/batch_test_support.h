// A batch of script calls for the clients' one-write-per-batch tests: what RedisStore::CheckBatch
// sends with coalesce_max 1, with replies that say which call they answer. Thread safety: call
// from one thread.
#pragma once

#include <cstdint>
#include <string>

#include "redis/client.h"

namespace sluice::testing {

struct BatchCost {
  uint64_t commands = 0;
  uint64_t writes = 0;
};

// Sends `calls` INCRBY script calls on the keys key_prefix + "batch" + i as one EvalShaBatch,
// twice: the first loads the script. Checks (gtest) that every reply of the second comes back,
// in order, and returns the commands and socket writes the second took.
BatchCost SendOrderedBatch(redis::Client& client, const std::string& key_prefix, int calls);

}  // namespace sluice::testing
