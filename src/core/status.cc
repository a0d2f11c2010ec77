#include "sluice/status.h"

#include "base/names.h"

namespace sluice {

namespace {

constexpr base::EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {StatusCode::kCostExceedsLimit, "COST_EXCEEDS_LIMIT"},
    {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {StatusCode::kUnavailable, "UNAVAILABLE"},
    {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {StatusCode::kInternal, "INTERNAL"},
};

}  // namespace

const char* StatusCodeName(StatusCode code) {
  return base::NameOf(kStatusCodeNames, code, "UNKNOWN");
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace sluice
