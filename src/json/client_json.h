// The one reader of the JSON a client sends to `sluice serve` (/v1/check, /v1/acquire, the rate
// limit service's POST /json). It refuses what two readers could take to mean different things:
// a key that appears twice in one object, at any depth. {"cost":1,"cost":0} is a check of cost 1
// to a reader that keeps the first, a peek to one that keeps the last (nlohmann::json, protobuf);
// anything in front of sluice that validates or logs the request would disagree with sluice about
// what was asked.
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "sluice/status.h"

namespace sluice::json {

// A key quoted in an error is cut to this many bytes (and "..." added), so that the message
// stays short whatever the client sent.
inline constexpr size_t kMaxQuotedKeyBytes = 64;
// The parser's error, which quotes what it read last, is cut to this many bytes.
inline constexpr size_t kMaxParseErrorBytes = 256;

// `text` as one JSON document; INVALID_ARGUMENT "malformed JSON: ..." when it is not JSON, or
// "duplicate key '<key>' ..." when an object has a key twice.
Result<nlohmann::json> ReadClientJson(std::string_view text);

}  // namespace sluice::json
