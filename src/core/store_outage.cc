// What a store outage is, and the names of the failure policies that decide during one.
#include <string>

#include "core/names.h"
#include "sluice/store.h"

namespace sluice {
namespace {

constexpr core::EnumName<FailurePolicy> kFailurePolicyNames[] = {
    {FailurePolicy::kFailOpen, "fail_open"},
    {FailurePolicy::kFailClosed, "fail_closed"},
    {FailurePolicy::kLocalFallback, "local_fallback"},
};

}  // namespace

const char* FailurePolicyName(FailurePolicy policy) {
  return core::NameOf(kFailurePolicyNames, policy);
}

Result<FailurePolicy> ParseFailurePolicy(std::string_view name) {
  if (auto policy = core::ParseName(kFailurePolicyNames, name)) return *policy;
  return Status::InvalidArgument("unknown failure policy '" + std::string(name) + "' (expected " +
                                 core::NameList(kFailurePolicyNames) + ")");
}

bool IsStoreOutage(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace sluice
