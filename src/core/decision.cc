#include "sluice/decision.h"

#include "base/names.h"

namespace sluice {
namespace {

constexpr base::EnumName<DecisionSource> kDecisionSourceNames[] = {
    {DecisionSource::kStore, "store"},
    {DecisionSource::kHotKeyCache, "hot_key_cache"},
    {DecisionSource::kFailOpen, "fail_open"},
    {DecisionSource::kFailClosed, "fail_closed"},
    {DecisionSource::kLocalFallback, "local_fallback"},
};

}  // namespace

const char* DecisionSourceName(DecisionSource source) {
  return base::NameOf(kDecisionSourceNames, source);
}

}  // namespace sluice
