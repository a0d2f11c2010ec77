// What makes a store's input valid, beyond one check (ValidateCheck, in sluice/store.h): the
// (scope, key) pair a check and a reset both name, and the requests CheckAll decides together.
// Every Store method validates with these before deciding anything. Pure functions; thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice::core {

Status ValidateScopeAndKey(std::string_view scope, std::string_view key);
// Between 1 and kMaxCheckAll valid requests, of distinct (scope, key) pairs, booking nothing.
Status ValidateAll(std::span<const CheckRequest> requests);

}  // namespace sluice::core
