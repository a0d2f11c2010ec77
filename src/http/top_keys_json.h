// GET /v1/top: its query string, ?rule=NAME&n=10 (both optional), and its JSON answer, one object
// per rule:
//   {"rule":"api","tracked":true,"window_s":272,"denied":1500,"max_error":23,
//    "keys":[{"key":"user:42","denied":1200,"error":0},...]}
// (see http/top_keys.h for what the counts mean). Keys are the clients' bytes: the JSON is ASCII,
// everything else escaped, and a key that is not valid UTF-8 is given with each invalid byte
// replaced by U+FFFD and, to tell such keys apart, its bytes in hex as "key_hex".
// Pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/top_keys.h"
#include "sluice/status.h"

namespace sluice::http {

inline constexpr size_t kDefaultTopKeysShown = 10;

struct TopQuery {
  std::optional<std::string> rule;  // none: every rule
  size_t n = kDefaultTopKeysShown;
};

// The query (what follows '?'): percent-encoded, fields rule and n (1 to `max_n`), each at most
// once. INVALID_ARGUMENT naming what is wrong otherwise.
Result<TopQuery> ParseTopQuery(std::string_view query, size_t max_n);

void AppendTopJson(std::string& out, std::string_view rule, const TopKeysReport& report);

}  // namespace sluice::http
