#include "sluice/store_health.h"

#include "base/names.h"

namespace sluice {
namespace {

constexpr base::EnumName<BreakerState> kBreakerStateNames[] = {
    {BreakerState::kClosed, "closed"},
    {BreakerState::kOpen, "open"},
    {BreakerState::kHalfOpen, "half_open"},
};

}  // namespace

const char* BreakerStateName(BreakerState state) { return base::NameOf(kBreakerStateNames, state); }

}  // namespace sluice
