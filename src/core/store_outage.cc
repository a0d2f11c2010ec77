// What a store outage is, and the names of the failure policies that decide during one.
#include <string>

#include "base/names.h"
#include "sluice/store.h"

namespace sluice {
namespace {

constexpr base::EnumName<FailurePolicy> kFailurePolicyNames[] = {
    {FailurePolicy::kFailOpen, "fail_open"},
    {FailurePolicy::kFailClosed, "fail_closed"},
    {FailurePolicy::kLocalFallback, "local_fallback"},
};

}  // namespace

const char* FailurePolicyName(FailurePolicy policy) {
  return base::NameOf(kFailurePolicyNames, policy);
}

Result<FailurePolicy> ParseFailurePolicy(std::string_view name) {
  if (auto policy = base::ParseName(kFailurePolicyNames, name)) return *policy;
  return Status::InvalidArgument("unknown failure policy '" + std::string(name) + "' (expected " +
                                 base::NameList(kFailurePolicyNames) + ")");
}

bool IsStoreOutage(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace sluice
