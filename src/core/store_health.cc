#include "sluice/store_health.h"

#include "core/names.h"

namespace sluice {
namespace {

constexpr core::EnumName<BreakerState> kBreakerStateNames[] = {
    {BreakerState::kClosed, "closed"},
    {BreakerState::kOpen, "open"},
    {BreakerState::kHalfOpen, "half_open"},
};

}  // namespace

const char* BreakerStateName(BreakerState state) { return core::NameOf(kBreakerStateNames, state); }

}  // namespace sluice
